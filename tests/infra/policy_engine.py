"""The policy pack driven the way the Pulumi engine drives it: a subprocess spoken to over gRPC.

What the engine does, and this harness with it (pulumi/pulumi: pkg/resource/plugin/analyzer_plugin.go,
pkg/resource/deploy/step_generator.go, pkg/engine/update.go, sdk/policy_proxy.go and the Python
language host's RunPlugin in sdk/python/cmd/pulumi-language-python/main.go):
- the language host starts the pack as `python -u -m pulumi.policy <engine address> <pack dir>`, in the
  pack directory, with PULUMI_PROJECT, PULUMI_STACK, PULUMI_ORGANIZATION, PULUMI_DRY_RUN and
  PULUMI_CONFIG (the stack's config, a JSON object of strings) taken from the engine's ConfigureStack,
  and reads the port the pack prints on its first line of stdout;
- Handshake and ConfigureStack may answer UNIMPLEMENTED (pulumi-policy 1.7.0 does; the engine and the
  host's proxy go on); then GetAnalyzerInfo, and Configure with each policy's enforcement level
  (ReconcilePolicyPackConfig gives every policy an entry, so Configure is always called);
- for each resource the program registers: Remediate (UNIMPLEMENTED: skipped), then Analyze with the
  resource's INPUTS, marshalled KeepUnknowns/KeepSecrets/SkipInternalKeys: an unknown is the sentinel
  string, a secret the secret-signature object, a resource reference its id (or URN);
- once, at the end of the preview or update: AnalyzeStack with every resource's OUTPUTS, its parent,
  dependencies and property dependencies (keyed by input property, as the program registered them).

Outputs are what pulumi-azure-native answers (provider/pkg/provider/provider.go, convert/): in a
preview, Create(preview=true) returns PreviewOutputs, every output property of the type with its input
value when there is one and unknown otherwise; after a create, the response body in SDK shape, so only
the type's output properties (the getters of its SDK class: never input-only properties such as a
container's `containerName` or a role definition's `roleDefinitionId`) and never what the SDK says
is not returned (a WebApp's `siteConfig`: "not returned in response to normal create and read
requests since it may contain sensitive information").

Not reproduced: the provider's Check (azure-native's defaults and autonames are not added to the
inputs; the SDK's own defaults are there), provider config in the default providers' inputs, and the
azuread provider's own preview (a bridged Terraform provider: modelled like azure-native's, inputs
echoed and the rest unknown); created outputs are the mocks' answers (tests/infra/pulumi_harness.py)
kept to the type's output properties, so a computed output the mocks do not answer is absent.
The pack never dials the engine address: pulumi.policy's __main__ only parses it, and pulumi.log
writes to stderr when no engine is configured, so no engine server is started.
"""

from __future__ import annotations

import collections.abc
import copy
import functools
import importlib
import json
import os
import subprocess
import sys
import tempfile
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi import _types
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc, resource_pb2

from infra.program import deploy
from infra.stack_config import read_stack_config
from tests.infra.pulumi_harness import AzureMocks, RecordingMonitor, run_program
from tests.infra.stacks import stack_run

PACK_DIR = Path(__file__).resolve().parents[2] / "infra" / "policy"
PROJECT = "claimcheck"
ORGANIZATION = "organization"  # what the host passes for a DIY backend
STACK_TYPE = "pulumi:pulumi:Stack"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's sentinel for an unknown string
_SIG = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
_OUTPUT_SIG = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
# Output properties the SDK documents as never returned by create or read.
WRITE_ONLY = {"azure-native:web:WebApp": frozenset({"siteConfig"})}
LEVELS = {analyzer_pb2.ADVISORY: "advisory", analyzer_pb2.MANDATORY: "mandatory"}


@dataclass
class EngineResource:
    """One resource as the engine holds it: JSON-like inputs and outputs (Struct values)."""

    urn: str
    id: str  # the ARM id; empty while a preview does not know it
    type: str
    name: str
    custom: bool
    parent: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    provider: EngineResource | None
    protect: bool
    inputs: dict[str, Any]
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass
class EngineRun:
    """What one `pulumi preview` (first: nothing exists) or update registered."""

    stack: str
    preview: bool
    resources: list[EngineResource]

    def of_type(self, suffix: str) -> list[EngineResource]:
        return [resource for resource in self.resources if resource.type.endswith(f":{suffix}")]

    def one(self, suffix: str, name_part: str = "") -> EngineResource:
        (match,) = [r for r in self.of_type(suffix) if name_part in r.name]
        return match

    def by_urn(self, urn: str) -> EngineResource:
        (match,) = [r for r in self.resources if r.urn == urn]
        return match

    def copy(self) -> EngineRun:
        """A deep copy to craft a violation in (the cached runs stay as the program registered them)."""
        return copy.deepcopy(self)


@dataclass(frozen=True)
class Diagnostic:
    policy: str
    level: str  # "mandatory" or "advisory"
    message: str
    urn: str


def _struct_to_json(struct: struct_pb2.Struct) -> dict[str, Any]:
    converted: dict[str, Any] = json_format.MessageToDict(struct)
    return converted


def _json_to_struct(value: dict[str, Any]) -> struct_pb2.Struct:
    return json_format.ParseDict(value, struct_pb2.Struct())


def engine_value(value: Any) -> Any:
    """A value as the engine marshals it for an analyzer (KeepUnknowns, KeepSecrets, no resources, no
    output values): a resource reference becomes its id (or URN), an output value its element."""
    if isinstance(value, list):
        return [engine_value(item) for item in value]
    if not isinstance(value, dict):
        return value
    signature = value.get(_SIG)
    if signature == _RESOURCE_SIG:
        return value.get("id") or value["urn"]
    if signature == _OUTPUT_SIG:
        element = engine_value(value["value"]) if "value" in value else UNKNOWN
        return {_SIG: _SECRET_SIG, "value": element} if value.get("secret") else element
    if signature == _SECRET_SIG:
        return {_SIG: _SECRET_SIG, "value": engine_value(value["value"])}
    return {key: engine_value(item) for key, item in value.items()}


def engine_properties(props: dict[str, Any]) -> dict[str, Any]:
    """Top-level internal keys (`__defaults`, `__inputs`) are skipped, as SkipInternalKeys does."""
    return {key: engine_value(value) for key, value in props.items() if not key.startswith("__")}


@functools.cache
def output_types(resource_type: str) -> dict[str, Any]:
    """The output properties of a provider's resource type and their types: its SDK class's getters."""
    package, module, name = resource_type.split(":")
    modules = {"azure-native": f"pulumi_azure_native.{module}", "azuread": "pulumi_azuread"}
    resource_class = getattr(importlib.import_module(modules[package]), name)
    types = _types.resource_types(resource_class)
    return {key: types.get(key, Any) for key in _types.resource_pulumi_to_py_names(resource_class)}


def _preview_value(value: Any, declared: Any) -> Any:
    """previewOutputValue: an input of the output's type is echoed (objects property by property,
    each one missing unknown); anything else is unknown."""
    declared = _types.unwrap_optional_type(declared)
    origin = typing.get_origin(declared)
    if value == UNKNOWN or declared is Any:
        return value
    if declared is bool:
        return value if isinstance(value, bool) else UNKNOWN
    if declared in (int, float):
        return value if isinstance(value, int | float) and not isinstance(value, bool) else UNKNOWN
    if declared is str:
        return value if isinstance(value, str) else UNKNOWN
    if origin in (list, collections.abc.Sequence):
        (item,) = typing.get_args(declared)
        return [_preview_value(v, item) for v in value] if isinstance(value, list) else UNKNOWN
    if origin in (dict, collections.abc.Mapping):
        item = typing.get_args(declared)[1]
        return {k: _preview_value(v, item) for k, v in value.items()} if isinstance(value, dict) else UNKNOWN
    if _types.is_output_type(declared):
        if not isinstance(value, dict):
            return UNKNOWN
        nested = _types.output_type_types(declared)
        return {key: _preview_value(value.get(key, UNKNOWN), kind) for key, kind in nested.items()}
    return value if isinstance(value, str | int | float | bool) else UNKNOWN


def preview_outputs(resource_type: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Create(preview=true): each output property echoes its input (shaped by the output's type), or is
    unknown."""
    return {
        key: _preview_value(inputs.get(key, UNKNOWN), declared)
        for key, declared in output_types(resource_type).items()
        if key not in ("id", "urn")
    }


def created_outputs(resource_type: str, answered: dict[str, Any]) -> dict[str, Any]:
    """The provider's answer to a create, kept to what the type returns."""
    hidden = WRITE_ONLY.get(resource_type, frozenset())
    return {k: v for k, v in answered.items() if k in output_types(resource_type) and k not in hidden}


class EngineMonitor(RecordingMonitor):
    """The mock resource monitor, recording each registration as the engine would hold it; in a
    preview it answers custom resources as azure-native's Create(preview=true) does."""

    def __init__(self, mocks: AzureMocks, *, stack: str, preview: bool) -> None:
        super().__init__(mocks)
        self.stack, self.preview = stack, preview
        self.registered: list[EngineResource] = []
        self.providers: dict[str, EngineResource] = {}

    def _provider(self, request: Any) -> EngineResource | None:
        if not request.custom:
            return None
        if request.provider:  # an explicit provider: "<urn>::<id>"
            urn = request.provider.rsplit("::", 1)[0]
            return next(r for r in self.registered if r.urn == urn)
        package, version = request.type.split(":")[0], request.version
        name = f"default_{version.replace('.', '_')}" if version else "default"
        urn = f"urn:pulumi:{self.stack}::{PROJECT}::pulumi:providers:{package}::{name}"
        if urn not in self.providers:
            props = {"version": version} if version else {}
            self.providers[urn] = EngineResource(
                urn, "", f"pulumi:providers:{package}", name, True, "", [], {}, None, False, props, props
            )
        return self.providers[urn]

    def RegisterResource(self, request: Any) -> Any:
        inputs = engine_properties(_struct_to_json(request.object))
        if self.preview and request.custom:
            urn = self.make_urn(request.parent, request.type, request.name)
            outputs = preview_outputs(request.type, inputs)
            response = resource_pb2.RegisterResourceResponse(urn=urn, id="", object=_json_to_struct(outputs))
        else:
            response = super().RegisterResource(request)
            answered = engine_properties(_struct_to_json(response.object))
            outputs = created_outputs(request.type, answered) if request.custom else {}
        self.registered.append(
            EngineResource(
                urn=response.urn,
                id=response.id,
                type=request.type,
                name=request.name,
                custom=request.custom,
                parent=request.parent,
                dependencies=list(request.dependencies),
                property_dependencies={
                    key: list(deps.urns) for key, deps in request.propertyDependencies.items() if deps.urns
                },
                provider=self._provider(request),
                protect=request.protect,
                inputs=inputs,
                outputs=outputs,
            )
        )
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        """A component's (or the stack's) registered outputs are its outputs in the engine's state."""
        for resource in self.registered:
            if resource.urn == request.urn:
                resource.outputs = engine_properties(_struct_to_json(request.outputs))
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]


def stack_config(stack: str) -> dict[str, str]:
    """The stack's config as ConfigureStack carries it: "project:key" -> string (JSON for objects)."""
    return {
        f"{PROJECT}:{key}": value if isinstance(value, str) else json.dumps(value)
        for key, value in read_stack_config(stack).items()
    }


@functools.cache
def engine_run(variant: str, *, preview: bool) -> EngineRun:
    """A stack of tests/infra/stacks.py ("dev", "prod", "prod+producer") run once under mocks, as a
    first preview (nothing exists yet) or as the update that creates everything. Cached: crafted
    violations work on `.copy()`."""
    monitors: list[EngineMonitor] = []
    stack = variant.partition("+")[0]

    def monitor_type(mocks: AzureMocks) -> EngineMonitor:
        monitors.append(EngineMonitor(mocks, stack=stack, preview=preview))
        return monitors[-1]

    settings, _ = stack_run(variant)
    run_program(lambda: deploy(settings), stack=stack, preview=preview, monitor_type=monitor_type)
    (monitor,) = monitors
    return EngineRun(stack, preview, [*monitor.providers.values(), *monitor.registered])


def _options(resource: EngineResource) -> analyzer_pb2.AnalyzerResourceOptions:
    return analyzer_pb2.AnalyzerResourceOptions(protect=resource.protect, parent=resource.parent)


def _provider(resource: EngineResource) -> analyzer_pb2.AnalyzerProviderResource | None:
    provider = resource.provider
    if provider is None:
        return None
    return analyzer_pb2.AnalyzerProviderResource(
        type=provider.type, urn=provider.urn, name=provider.name, properties=_json_to_struct(provider.inputs)
    )


def _unimplemented_ok(call: Callable[[], Any]) -> None:
    """The engine goes on when a pack does not implement a newer method."""
    try:
        call()
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.UNIMPLEMENTED:
            raise


class PolicyPack:
    """The claimcheck-security pack as a running plugin, started as the Python language host does."""

    def __init__(self, *, stack: str, dry_run: bool) -> None:
        env = {key: value for key, value in os.environ.items() if not key.startswith("PULUMI_")}
        env.pop("PYTHONPATH", None)  # the host sets none: the pack's __main__.py finds the repository
        env |= {
            "PULUMI_PROJECT": PROJECT,
            "PULUMI_STACK": stack,
            "PULUMI_ORGANIZATION": ORGANIZATION,
            "PULUMI_DRY_RUN": "true" if dry_run else "false",
            "PULUMI_CONFIG": json.dumps(stack_config(stack)),
        }
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (the pack outlives this call; close())
        engine_address = "127.0.0.1:1"  # parsed by pulumi.policy, never dialled (module docstring)
        self._process = subprocess.Popen(
            [sys.executable, "-u", "-m", "pulumi.policy", engine_address, str(PACK_DIR)],
            cwd=PACK_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        assert self._process.stdout is not None
        first_line = self._process.stdout.readline().decode().strip()
        if not first_line.isdigit():
            self.close()
            raise RuntimeError(f"the policy pack did not start: {self.stderr()}")
        self._channel = grpc.insecure_channel(f"127.0.0.1:{int(first_line)}")
        self._analyzer = analyzer_pb2_grpc.AnalyzerStub(self._channel)
        directory = str(PACK_DIR)
        _unimplemented_ok(
            lambda: self._analyzer.Handshake(
                analyzer_pb2.AnalyzerHandshakeRequest(
                    engine_address=engine_address, root_directory=directory, program_directory=directory
                )
            )
        )
        _unimplemented_ok(
            lambda: self._analyzer.ConfigureStack(
                analyzer_pb2.AnalyzerStackConfigureRequest(
                    stack=stack, project=PROJECT, organization=ORGANIZATION, dry_run=dry_run
                )
            )
        )
        self.info = self._analyzer.GetAnalyzerInfo(empty_pb2.Empty())
        self._analyzer.Configure(
            analyzer_pb2.ConfigureAnalyzerRequest(
                policyConfig={
                    policy.name: analyzer_pb2.PolicyConfig(
                        enforcementLevel=policy.enforcementLevel, properties=struct_pb2.Struct()
                    )
                    for policy in self.info.policies
                }
            )
        )

    @property
    def levels(self) -> dict[str, str]:
        """Each policy's enforcement level, as the pack declares it."""
        return {policy.name: LEVELS[policy.enforcementLevel] for policy in self.info.policies}

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def close(self) -> None:
        if hasattr(self, "_channel"):
            self._channel.close()
        self._process.kill()
        self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._stderr.close()

    def _request(self, resource: EngineResource) -> analyzer_pb2.AnalyzeRequest:
        return analyzer_pb2.AnalyzeRequest(
            type=resource.type,
            properties=_json_to_struct(resource.inputs),
            urn=resource.urn,
            name=resource.name,
            options=_options(resource),
            provider=_provider(resource),
        )

    def analyze(self, resource: EngineResource) -> list[Diagnostic]:
        """The engine's two passes for one registration: Remediate, then Analyze on the inputs."""
        request = self._request(resource)
        _unimplemented_ok(lambda: self._analyzer.Remediate(request))
        return _diagnostics(self._analyzer.Analyze(request), resource.urn)

    def analyze_stack(self, resources: Iterable[EngineResource]) -> list[Diagnostic]:
        request = analyzer_pb2.AnalyzeStackRequest(
            resources=[
                analyzer_pb2.AnalyzerResource(
                    type=resource.type,
                    properties=_json_to_struct(resource.outputs),
                    urn=resource.urn,
                    name=resource.name,
                    options=_options(resource),
                    provider=_provider(resource),
                    parent=resource.parent,
                    dependencies=resource.dependencies,
                    propertyDependencies={
                        key: analyzer_pb2.AnalyzerPropertyDependencies(urns=urns)
                        for key, urns in resource.property_dependencies.items()
                    },
                )
                for resource in resources
            ]
        )
        return _diagnostics(self._analyzer.AnalyzeStack(request), "")

    def run(self, run: EngineRun) -> list[Diagnostic]:
        """Every diagnostic of a preview or update: Analyze per registration, then AnalyzeStack."""
        diagnostics = [diagnostic for resource in run.resources for diagnostic in self.analyze(resource)]
        return diagnostics + self.analyze_stack(run.resources)


def _diagnostics(response: analyzer_pb2.AnalyzeResponse, urn: str) -> list[Diagnostic]:
    """A resource policy's diagnostic carries no URN (the engine adds the analyzed resource's)."""
    return [
        Diagnostic(d.policyName, LEVELS[d.enforcementLevel], d.message, d.urn or urn)
        for d in response.diagnostics
    ]


class PackPool:
    """One running pack per (stack, dry run), as each `pulumi preview`/`up` starts its own; closed
    together (a module fixture), so a test module pays each start once."""

    def __init__(self) -> None:
        self._packs: dict[tuple[str, bool], PolicyPack] = {}

    def __call__(self, stack: str, *, dry_run: bool) -> PolicyPack:
        key = (stack, dry_run)
        if key not in self._packs:
            self._packs[key] = PolicyPack(stack=stack, dry_run=dry_run)
        return self._packs[key]

    def close(self) -> None:
        for pack in self._packs.values():
            pack.close()


def pack_pool() -> Iterator[PackPool]:
    pool = PackPool()
    try:
        yield pool
    finally:
        pool.close()
