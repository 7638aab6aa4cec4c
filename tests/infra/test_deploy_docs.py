"""docs/deploy.md against what the code does: resource providers, the package's files, stack outputs."""

from __future__ import annotations

import re

import pytest

from infra.stack_config import REPO_ROOT
from scripts.package import TOP_LEVEL_FILES
from tests.infra.stacks import stack_run

DOC = (REPO_ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")

# The resource provider namespace behind each azure-native module the program uses.
PROVIDER_OF_MODULE = {
    "resources": "Microsoft.Resources",
    "servicebus": "Microsoft.ServiceBus",
    "storage": "Microsoft.Storage",
    "web": "Microsoft.Web",
    "managedidentity": "Microsoft.ManagedIdentity",
    "applicationinsights": "Microsoft.Insights",
    "monitor": "Microsoft.Insights",
    "operationalinsights": "Microsoft.OperationalInsights",
    "authorization": "Microsoft.Authorization",
    "network": "Microsoft.Network",
    "privatedns": "Microsoft.Network",
}
ALWAYS_REGISTERED = {"Microsoft.Resources"}  # every subscription has it


def _paragraph_after(marker: str) -> str:
    start = DOC.index(marker) + len(marker)
    return DOC[start:].strip().split("\n\n", 1)[0]


def _required_providers(stack: str) -> set[str]:
    """Namespaces of the ARM resources the stack registers, and of the services its subnets delegate to."""
    _, run = stack_run(stack)
    providers = set()
    for resource in run.resources:
        package, module, _ = resource.type.split(":")
        if package == "azure-native":
            assert module in PROVIDER_OF_MODULE, f"add azure-native module {module!r} to PROVIDER_OF_MODULE"
            providers.add(PROVIDER_OF_MODULE[module])
    for subnet in run.of_type("Subnet"):
        providers |= {d["serviceName"].split("/")[0] for d in subnet.inputs.get("delegations", [])}
    return providers - ALWAYS_REGISTERED


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_prerequisites_name_every_resource_provider_the_stack_needs(stack: str) -> None:
    """A provider left unregistered fails `pulumi up` midway (Flex VNet integration needs Microsoft.App)."""
    prerequisites = _paragraph_after("## 1. Prerequisites")
    missing = sorted(p for p in _required_providers(stack) if f"`{p}`" not in prerequisites)
    assert missing == []


def test_package_section_lists_every_file_the_zip_holds() -> None:
    """Section 7 names each top-level file scripts/package.py puts in the zip."""
    section = _paragraph_after("## 7. The code package and its deployment")
    assert [name for name in TOP_LEVEL_FILES if f"`{name}`" not in section] == []


def test_stack_outputs_section_lists_exactly_the_exports() -> None:
    """The outputs paragraph names every key the program exports, and nothing else."""
    listed = set(re.findall(r"`([a-z][A-Za-z]+)`", _paragraph_after("## Stack outputs")))
    for stack in ("dev", "prod"):
        assert listed == set(stack_run(stack)[1].outputs)
