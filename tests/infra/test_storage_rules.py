"""Storage rules that agree with the app: lifecycle ages from the purpose table, one provisional tag."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from claimcheck.policy import DEFAULT_PURPOSES
from claimcheck.settings import (
    IMMUTABLE_CONTAINERS_SETTING,
    PROVISIONAL_TAG_NAME_SETTING,
    PROVISIONAL_TAG_VALUE_SETTING,
    PURPOSE_CONTAINERS_SETTING,
    ProvisionalTag,
    Settings,
    SettingsError,
)

from infra.policy import rules
from infra.policy.rules import PURPOSES_METADATA
from infra.program import deploy
from infra.stack_config import StackConfigError, load_settings, read_stack_config
from infra.topology import EVIDENCE_PURPOSE, TopologyError, load_topology
from infra.topology.spec import RETENTION_MARGIN_DAYS, minimum_expiry_days
from tests.infra.pulumi_harness import APP_PRINCIPAL_ID, ProgramRun, run_program
from tests.infra.stacks import Stack, stack_run


def _rules(run: ProgramRun) -> dict[str, Any]:
    declared = run.one("ManagementPolicy").inputs["policy"]["rules"]
    return {rule["name"]: rule["definition"] for rule in declared}


def _app_settings(run: ProgramRun) -> dict[str, str]:
    return {pair["name"]: pair["value"] for pair in run.one("WebApp").inputs["siteConfig"]["appSettings"]}


def test_no_rule_deletes_payloads_before_every_purpose_retention_plus_margin(stack: Stack) -> None:
    """The expiry rule waits past each purpose's retention by the margin; tiering never deletes."""
    _, run = stack
    expiry = _rules(run)["tierAndExpirePayloads"]["actions"]["baseBlob"]["delete"]
    for purpose in DEFAULT_PURPOSES.values():
        assert expiry["daysAfterModificationGreaterThan"] >= purpose.retention.days + RETENTION_MARGIN_DAYS


def test_expiry_before_the_longest_retention_is_refused_naming_the_key() -> None:
    earliest, purpose = minimum_expiry_days()
    assert earliest == max(p.retention.days for p in DEFAULT_PURPOSES.values()) + RETENTION_MARGIN_DAYS
    assert DEFAULT_PURPOSES[purpose].retention.days + RETENTION_MARGIN_DAYS == earliest
    with pytest.raises(TopologyError) as raised:
        load_topology(
            {"lifecycle": {"coolAfterDays": 2, "coldAfterDays": 3, "deleteAfterDays": earliest - 1}}
        )
    assert "topology.lifecycle.deleteAfterDays" in str(raised.value)
    assert load_topology({"lifecycle": {"deleteAfterDays": earliest}}).lifecycle.delete_after_days == earliest


def test_a_changed_provisional_tag_reaches_the_rule_and_the_app() -> None:
    """One source: the topology's tag is what the orphan rule matches and what the app writes."""
    config = read_stack_config("dev")
    config["topology"]["lifecycle"] |= {"provisionalTagName": "cc-publish", "provisionalTagValue": "pending"}
    settings = load_settings(config, "dev")
    run = run_program(lambda: deploy(settings), stack="dev")
    orphan_filter = _rules(run)["deleteProvisionalOrphans"]["filters"]
    assert orphan_filter["blobIndexMatch"] == [{"name": "cc-publish", "op": "==", "value": "pending"}]
    app = Settings.from_env(_app_settings(run))
    assert app.provisional_tag == ProvisionalTag(name="cc-publish", value="pending")


def test_the_active_value_cannot_be_the_provisional_one() -> None:
    with pytest.raises(TopologyError) as raised:
        load_topology({"lifecycle": {"provisionalTagValue": "active"}})
    assert "topology.lifecycle.provisionalTagValue" in str(raised.value)
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({PROVISIONAL_TAG_VALUE_SETTING: "active"})
    assert PROVISIONAL_TAG_VALUE_SETTING in str(refused.value)


def test_a_malformed_tag_setting_is_refused_naming_it() -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({PROVISIONAL_TAG_NAME_SETTING: "state?"})
    assert PROVISIONAL_TAG_NAME_SETTING in str(refused.value)
    assert Settings.from_env({}).provisional_tag == ProvisionalTag()


def test_deleted_payload_window_is_versions_plus_soft_delete(stack: Stack) -> None:
    settings, run = stack
    assert run.outputs["deletedPayloadRecoverableDays"] == (
        settings.topology.lifecycle.old_versions_delete_after_days + settings.blob_delete_retention_days
    )


def test_evidence_has_its_own_container_in_both_stacks(stack: Stack) -> None:
    """The purpose table routes evidence-archive to its own container: declared, granted to the app,
    covered by the lifecycle rules, and named in the app settings the app routes by."""
    settings, run = stack
    evidence = run.one("BlobContainer", containerName="evidence").inputs
    assert evidence["metadata"] == {PURPOSES_METADATA: "evidence-archive"}
    shared = run.one("BlobContainer", containerName="payloads").inputs
    assert shared["metadata"] == {PURPOSES_METADATA: "bulk-ingest contract-review"}
    rules = _rules(run)
    for name in ("tierAndExpirePayloads", "deleteOldVersions"):
        assert rules[name]["filters"]["prefixMatch"] == ["payloads/", "evidence/"]
    assert run.outputs["purposeContainers"] == {"evidence-archive": "evidence"}
    app_settings = _app_settings(run)
    assert json.loads(app_settings[PURPOSE_CONTAINERS_SETTING]) == {"evidence-archive": "evidence"}
    assert json.loads(app_settings[IMMUTABLE_CONTAINERS_SETTING]) == settings.immutable_containers()
    app = Settings.from_env(app_settings)  # what the app routes by
    assert (app.purpose_containers, app.immutable_containers) == (
        {"evidence-archive": "evidence"},
        settings.immutable_containers(),
    )
    scopes = {
        assignment.inputs["scope"]
        for assignment in run.of_type("RoleAssignment")
        if assignment.inputs["principalId"] == APP_PRINCIPAL_ID
    }
    containers = {
        container.inputs["containerName"]: container.id for container in run.of_type("BlobContainer")
    }
    assert {containers["payloads"], containers["evidence"]} <= scopes


def test_prod_locks_evidence_versions_for_the_purpose_retention_and_dev_does_not() -> None:
    """prod: version-level immutability at creation and a default time-based policy equal to the
    evidence purpose's retention, on its container only; its orphans wait out the lock."""
    settings, run = stack_run("prod")
    retention_days = DEFAULT_PURPOSES["evidence-archive"].retention // timedelta(days=1)
    assert settings.immutable_containers() == {"evidence": retention_days}
    assert run.one("BlobContainer", containerName="evidence").inputs["immutableStorageWithVersioning"] == {
        "enabled": True
    }
    for unlocked in ("payloads", "app-package"):
        assert "immutableStorageWithVersioning" not in run.one("BlobContainer", containerName=unlocked).inputs
    policy = run.one("BlobContainerImmutabilityPolicy").inputs
    assert (policy["containerName"], policy["immutabilityPeriodSinceCreationInDays"]) == (
        "evidence",
        retention_days,
    )
    assert policy["allowProtectedAppendWritesAll"] is False
    rules = _rules(run)
    assert rules["deleteProvisionalOrphans"]["filters"]["prefixMatch"] == ["payloads/"]
    locked = rules["deleteLockedOrphans0"]
    assert locked["filters"]["prefixMatch"] == ["evidence/"]
    assert locked["actions"]["baseBlob"]["delete"]["daysAfterModificationGreaterThan"] == retention_days

    _, dev = stack_run("dev")
    assert dev.of_type("BlobContainerImmutabilityPolicy") == []
    assert "immutableStorageWithVersioning" not in dev.one("BlobContainer", containerName="evidence").inputs


def test_worm_is_refused_where_a_deleting_purpose_could_land() -> None:
    """Sharing the payload container, or routing a deleting purpose to the evidence container, is refused
    naming the key before any resource is declared."""
    config = read_stack_config("prod")
    shared = config | {"topology": {**config["topology"], "bindings": {"purposeContainers": {}}}}
    with pytest.raises(StackConfigError) as raised:
        load_settings(shared, "prod")
    assert str(raised.value).startswith("claimcheck:evidenceImmutability:")
    assert "shares the payload container" in str(raised.value)

    routes = {"evidence-archive": "evidence", "bulk-ingest": "evidence"}
    mixed = config | {"topology": {**config["topology"], "bindings": {"purposeContainers": routes}}}
    with pytest.raises(StackConfigError) as raised:
        load_settings(mixed, "prod")
    assert str(raised.value).startswith("claimcheck:evidenceImmutability:")
    assert "['bulk-ingest']" in str(raised.value)
    # Without WORM the same routing is fine: nothing would block the deletes.
    assert load_settings(mixed | {"evidenceImmutability": False}, "prod").immutable_containers() == {}


def test_routes_name_known_purposes_and_declared_containers() -> None:
    with pytest.raises(TopologyError, match="purposeContainers: 'archive' is not a purpose"):
        load_topology({"bindings": {"purposeContainers": {"archive": "evidence"}}})
    with pytest.raises(TopologyError, match="container 'vault' is not in the spec"):
        load_topology({"bindings": {"purposeContainers": {"evidence-archive": "vault"}}})
    moved = load_topology(
        {"containers": ["vault"], "bindings": {"purposeContainers": {"evidence-archive": "vault"}}}
    )
    assert moved.bindings.container_for("evidence-archive") == "vault"
    assert moved.bindings.container_for("bulk-ingest") == "payloads"


def test_no_worm_unless_the_stack_asks() -> None:
    settings = load_settings({}, "dev")
    assert settings.evidence_immutability is False
    assert settings.immutable_containers() == {}


def _evidence_problems(run: ProgramRun) -> list[tuple[int | None, str]]:
    return rules.production_evidence_worm_violations((r.type, r.inputs) for r in run.resources)


def test_shipped_stacks_pass_the_evidence_policy(stack: Stack) -> None:
    _, run = stack
    assert _evidence_problems(run) == []
    assert rules.EVIDENCE_PURPOSE == EVIDENCE_PURPOSE


def test_policy_requires_a_locked_evidence_container_in_production_only() -> None:
    """prod without WORM, or with evidence in the shared container, is refused naming the container
    (the pack's stack policy reports its URN); a stack whose containers name no evidence is refused
    too; the same shapes outside production pass."""
    config = read_stack_config("prod")
    unlocked = run_program(
        lambda: deploy(load_settings(config | {"evidenceImmutability": False}, "prod")), stack="prod"
    )
    ((index, problem),) = _evidence_problems(unlocked)
    assert index is not None
    assert unlocked.resources[index].inputs["containerName"] == "evidence"
    assert "'evidence' must enable version-level immutability" in problem
    shared_config = config | {
        "evidenceImmutability": False,
        "topology": {**config["topology"], "bindings": {"purposeContainers": {}}},
    }
    shared = run_program(lambda: deploy(load_settings(shared_config, "prod")), stack="prod")
    ((index, problem),) = _evidence_problems(shared)
    assert "'payloads' must enable version-level immutability" in problem
    unmarked = [(r.type, {k: v for k, v in r.inputs.items() if k != "metadata"}) for r in unlocked.resources]
    ((index, problem),) = rules.production_evidence_worm_violations(unmarked)
    assert index is None
    assert "container of their own" in problem
    dev_config = read_stack_config("dev") | {"topology": {"bindings": {"purposeContainers": {}}}}
    dev_shared = run_program(lambda: deploy(load_settings(dev_config, "dev")), stack="dev")
    assert _evidence_problems(dev_shared) == []
