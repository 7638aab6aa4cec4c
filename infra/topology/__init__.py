"""The messaging and storage topology: one typed spec, the single source of truth.

The Pulumi program, the Docker emulator's Config.json (infra/emulator_config.py), the local stack
and the Function App binding check all read this spec. It is pure (no Pulumi import) so cheap
callers can import it. `load_topology(config)` lays stack config (a plain dict: the value of
`claimcheck:topology`) over the default topology of docs/architecture.md §2 and validates the result before
any resource is declared; every problem is a `TopologyError` naming the entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from claimcheck.settings import EVIDENCE_PURPOSE

from infra.topology.overrides import apply_overrides
from infra.topology.spec import (
    Bindings,
    CorrelationFilterSpec,
    LifecycleSpec,
    PropertyValue,
    QueueSpec,
    RuleSpec,
    SubscriptionSpec,
    TableNames,
    TopicSpec,
    Topology,
    TopologyError,
    default_topology,
)
from infra.topology.validation import check_name, parse_iso_duration, validate_topology

__all__ = [
    "EVIDENCE_PURPOSE",
    "Bindings",
    "CorrelationFilterSpec",
    "LifecycleSpec",
    "PropertyValue",
    "QueueSpec",
    "RuleSpec",
    "SubscriptionSpec",
    "TableNames",
    "TopicSpec",
    "Topology",
    "TopologyError",
    "check_name",
    "default_topology",
    "load_topology",
    "parse_iso_duration",
    "validate_topology",
]


def load_topology(config: Mapping[str, Any] | None = None) -> Topology:
    """The default topology with stack config laid over it, validated."""
    return validate_topology(apply_overrides(default_topology(), config or {}))
