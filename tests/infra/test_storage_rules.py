"""Storage rules that agree with the app: lifecycle ages from the purpose table, one provisional tag."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from claimcheck.policy import DEFAULT_PURPOSES, CleanupPolicy
from claimcheck.settings import (
    PROVISIONAL_TAG_NAME_SETTING,
    PROVISIONAL_TAG_VALUE_SETTING,
    ProvisionalTag,
    Settings,
    SettingsError,
)

from infra import stack_config
from infra.program import deploy
from infra.stack_config import StackConfigError, load_settings, read_stack_config
from infra.topology import TopologyError, load_topology
from infra.topology.spec import RETENTION_MARGIN_DAYS, minimum_expiry_days
from tests.infra.pulumi_harness import ProgramRun, run_program
from tests.infra.stacks import Stack


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


def test_worm_is_refused_while_a_purpose_deletes() -> None:
    """The default purpose table has deleting purposes: WORM on their shared container is refused."""
    with pytest.raises(StackConfigError) as raised:
        load_settings(read_stack_config("prod") | {"evidenceImmutabilityDays": 30}, "prod")
    assert str(raised.value).startswith("claimcheck:evidenceImmutabilityDays")
    assert "contract-review" in str(raised.value)
    assert "bulk-ingest" in str(raised.value)


def test_worm_with_only_retaining_purposes_locks_every_payload_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    retaining = {
        name: replace(policy, cleanup=CleanupPolicy.RETAIN) for name, policy in DEFAULT_PURPOSES.items()
    }
    monkeypatch.setattr(stack_config, "DEFAULT_PURPOSES", retaining)
    config = read_stack_config("prod")
    with pytest.raises(StackConfigError) as raised:
        load_settings(config | {"evidenceImmutabilityDays": 366}, "prod")  # prod expires after 365
    assert str(raised.value).startswith("claimcheck:evidenceImmutabilityDays")
    settings = load_settings(config | {"evidenceImmutabilityDays": 90}, "prod")
    run = run_program(lambda: deploy(settings), stack="prod")
    payloads = run.one("BlobContainer", containerName="payloads").inputs
    assert payloads["immutableStorageWithVersioning"] == {"enabled": True}
    package = run.one("BlobContainer", containerName="app-package").inputs
    assert "immutableStorageWithVersioning" not in package
    policy = run.one("BlobContainerImmutabilityPolicy").inputs
    assert (policy["containerName"], policy["immutabilityPeriodSinceCreationInDays"]) == ("payloads", 90)


def test_no_worm_by_default(stack: Stack) -> None:
    settings, run = stack
    assert settings.evidence_immutability_days == 0
    assert run.of_type("BlobContainerImmutabilityPolicy") == []
