"""Tags from stack config on every resource that takes them, for the dev and prod stacks."""

from __future__ import annotations

from infra.stack_config import load_settings, read_stack_config
from infra.tags import TAGGED_TYPES, UNTAGGED_TYPES
from tests.infra.stacks import Stack


def test_every_taggable_resource_carries_the_stack_tags(stack: Stack) -> None:
    """environment, owner and costCenter from config on each resource of a tagged type; none missed."""
    settings, run = stack
    expected = {
        "environment": settings.environment,
        "owner": settings.owner,
        "costCenter": settings.cost_center,
    }
    tagged = [resource for resource in run.resources if resource.type in TAGGED_TYPES]
    assert {resource.type for resource in tagged} >= {
        "azure-native:resources:ResourceGroup",
        "azure-native:servicebus:Namespace",
        "azure-native:storage:StorageAccount",
        "azure-native:web:WebApp",
        "azure-native:monitor:MetricAlert",
    }
    untagged = [resource.name for resource in tagged if resource.inputs.get("tags") != expected]
    assert not untagged


def test_every_declared_type_is_classified(stack: Stack) -> None:
    """A resource type the program declares is either tagged or known not to take tags."""
    _, run = stack
    azure = {resource.type for resource in run.resources if not resource.type.startswith("claimcheck:")}
    assert azure - TAGGED_TYPES - UNTAGGED_TYPES == set()
    assert not TAGGED_TYPES & UNTAGGED_TYPES


def test_tag_values_come_from_config() -> None:
    config = read_stack_config("dev") | {"owner": "team-x", "costCenter": "cc-4711"}
    settings = load_settings(config, "dev")
    assert (settings.owner, settings.cost_center) == ("team-x", "cc-4711")
