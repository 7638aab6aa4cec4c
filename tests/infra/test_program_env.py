"""The Pulumi program's own environment: its requirement files list exactly what it imports, pinned
as the development environment has them, and Python is pinned once for CI, Pulumi and Azure."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from infra.components.function_app import PYTHON_VERSION
from infra.stack_config import REPO_ROOT

_REPO_PACKAGES = {"infra", "claimcheck", "__future__"}


def _loaded_repo_modules(entry_module: str) -> list[Path]:
    """Source files of the repository modules a fresh interpreter loads when importing `entry_module`."""
    code = (
        f"import json, sys; import {entry_module}; "
        f"print(json.dumps([getattr(m, '__file__', None) for m in list(sys.modules.values())]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, check=True, capture_output=True, text=True, timeout=120
    ).stdout
    files = [Path(f) for f in json.loads(out.splitlines()[-1]) if f]
    return [f for f in files if f.is_relative_to(REPO_ROOT) and ".venv" not in f.parts]


def _third_party_imports(files: list[Path]) -> set[str]:
    """Distributions of the module-level imports in `files` that are neither stdlib nor the repo's."""
    distributions = importlib.metadata.packages_distributions()
    found: set[str] = set()
    for path in files:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from namespace import module`: the module may belong to one of several distributions
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in _REPO_PACKAGES:
                    continue
                found.update(_normalise(dist) for dist in _shipping(name, distributions[top]))
    return found


def _shipping(name: str, candidates: list[str]) -> list[str]:
    """The distributions that ship module `name` (or, for an imported attribute, its module): one, unless
    the top-level package is a namespace several distributions share (opentelemetry)."""
    if len(set(candidates)) == 1:
        return candidates
    parts = name.split(".")
    while parts:
        prefix = "/".join(parts)
        shipping = [
            dist
            for dist in set(candidates)
            if any(
                str(file).startswith((f"{prefix}/", f"{prefix}.py"))
                for file in importlib.metadata.files(dist) or ()
            )
        ]
        if shipping:
            return shipping
        parts.pop()
    return candidates


def _requirements(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not pinned with =="
            pins[_normalise(name)] = version
    return pins


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize(
    ("entry", "requirements"),
    [
        ("infra.entrypoint", "infra/requirements.txt"),
        ("infra.policy.pack", "infra/policy/requirements.txt"),
    ],
)
def test_requirements_list_exactly_what_the_program_imports(entry: str, requirements: str) -> None:
    """The program's (and the policy pack's) requirement file names exactly the distributions its
    modules import, each pinned to the version the tests run with."""
    pins = _requirements(REPO_ROOT / requirements)
    assert set(pins) == _third_party_imports(_loaded_repo_modules(entry))
    for name, version in pins.items():
        assert importlib.metadata.version(name) == version, name


def test_pulumi_installs_the_programs_own_requirements() -> None:
    """Pulumi.yaml: pip toolchain, a virtualenv of its own (not the development .venv), main infra/,
    where the language host reads requirements.txt (the program directory)."""
    project = yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text(encoding="utf-8"))
    options = project["runtime"]["options"]
    assert options["toolchain"] == "pip"
    assert options["virtualenv"] not in (".venv", "venv")
    assert (REPO_ROOT / project["main"] / "requirements.txt").is_file()
    policy = yaml.safe_load((REPO_ROOT / "infra/policy/PulumiPolicy.yaml").read_text(encoding="utf-8"))
    assert policy["runtime"]["options"]["virtualenv"] not in (options["virtualenv"], "../../.venv")
    gitignore = (REPO_ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert f"{options['virtualenv']}/" in gitignore
    assert f"{Path(policy['runtime']['options']['virtualenv'].split()[0]).name}/" in gitignore


def test_python_is_pinned_once() -> None:
    """.python-version (CI's setup-python reads it) equals the Function App runtime and the project's
    requires-python."""
    pinned = (REPO_ROOT / ".python-version").read_text(encoding="utf-8").strip()
    assert pinned == PYTHON_VERSION
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["requires-python"] == f">={pinned},<3.{int(pinned.split('.')[1]) + 1}"


def test_development_requirements_include_the_programs() -> None:
    """requirements-dev.txt pulls the program's and the pack's files in, so their pins have one home."""
    lines = (REPO_ROOT / "requirements-dev.txt").read_text(encoding="utf-8").splitlines()
    assert "-r infra/requirements.txt" in lines
    assert "-r infra/policy/requirements.txt" in lines
    assert not [line for line in lines if re.match(r"pulumi", line)]
