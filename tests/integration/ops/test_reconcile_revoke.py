"""`claimcheck-ops reconcile` and `claimcheck-ops revoke` against Azurite with the real Storage SDKs."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from claimcheck import ClaimCheck, DeadLetter, DeadLetterReason, InboundMessage, Settings
from claimcheck.adapters.azure import provision_storage
from claimcheck.settings import DOCUMENTS_QUEUE, SETTING_NAMES
from claimcheck.testing import InMemoryBus, consume_and_settle

from scripts.ops_reconcile import LOCAL_KEY_HOLDER
from tests.integration.ops.bus import dead_letter_from_queue
from tests.integration.ops.cli import run_main, run_ops
from tests.integration.ops.emulator import running_emulator, write_stack_outputs

DOCUMENT = b"The Supplier shall deliver the goods. " * 1000


def _settings_env(settings: Settings) -> dict[str, str]:
    """What an operator exports: the app's settings, from the one table."""
    return settings.to_env()


@pytest.fixture
def world(storage_connection_string: str) -> tuple[ClaimCheck, InMemoryBus, dict[str, str]]:
    suffix = uuid.uuid4().hex[:10]
    settings = replace(
        Settings(environment="test"),
        payload_container=f"payloads-{suffix}",
        purpose_containers={},
        registry_table=f"registry{suffix}",
        idempotency_table=f"idempotency{suffix}",
        work_items_table=f"workitems{suffix}",
        audit_table=f"audit{suffix}",
        results_table=f"results{suffix}",
    )
    bus = InMemoryBus()
    provision_storage(settings, storage_connection_string)
    claimcheck = ClaimCheck.from_settings(settings, storage_connection=storage_connection_string, bus=bus)
    env = _settings_env(settings) | {"CLAIMCHECK_STORAGE_CONNECTION": storage_connection_string}
    return claimcheck, bus, env


def _submit(claimcheck: ClaimCheck, work_item_id: str) -> str:
    receipt = claimcheck.producer.submit(
        DOCUMENT,
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="restricted",
        content_type="text/plain",
        work_item_id=work_item_id,
    )
    assert receipt.payload_ref is not None
    return receipt.payload_ref


def test_reconcile_prints_the_report(
    world: tuple[ClaimCheck, InMemoryBus, dict[str, str]], storage_connection_string: str
) -> None:
    """A registered object deleted behind the app's back is flagged missing by the command's run."""
    claimcheck, _, env = world
    ref = _submit(claimcheck, "wi-ops-missing")
    container = BlobServiceClient.from_connection_string(storage_connection_string).get_container_client(
        env[SETTING_NAMES["payload_container"]]
    )
    container.delete_blob(ref)
    result = run_ops("reconcile", env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["flagged_missing"] == [ref]
    assert report["errors"] == []
    assert report["uncommitted_uploads_removed"] == []  # the direct-upload sweep ran too
    assert any("payload_missing" in alert for alert in report["alerts"])
    assert "Supplier" not in result.output


def test_revoke_blocks_reads_and_records_the_proven_identity(
    world: tuple[ClaimCheck, InMemoryBus, dict[str, str]],
    storage_connection_string: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The work item's latest object is revoked (a delivery dead-letters access_denied, the object
    stays); the identity logged is the credential's, not a typed name; a second revoke is an error."""
    claimcheck, bus, env = world
    ref = _submit(claimcheck, "wi-ops-revoke")
    result = run_ops("revoke", "wi-ops-revoke", "--reason", "investigation INC-7", env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "work_item_id": "wi-ops-revoke",
        "version": 1,
        "revoked": True,
        "revoked_by": LOCAL_KEY_HOLDER,
    }
    assert any(
        "investigation INC-7; revoked by " + LOCAL_KEY_HOLDER in record.getMessage()
        for record in caplog.records
    )
    (sent,) = bus.messages(DOCUMENTS_QUEUE)
    outcome = consume_and_settle(
        claimcheck.consumer,
        InboundMessage(
            body=sent.body, message_id=sent.message_id, delivery_count=1, session_id=sent.session_id
        ),
    )
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.ACCESS_DENIED
    tables = TableServiceClient.from_connection_string(storage_connection_string)
    (row,) = tables.get_table_client(env[SETTING_NAMES["registry_table"]]).list_entities()
    assert (row["PartitionKey"], row["state"]) == (ref, "access_denied")


def test_revoke_refuses_what_it_cannot_revoke(
    world: tuple[ClaimCheck, InMemoryBus, dict[str, str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unknown work item and an empty reason are one error line each and exit 1."""
    _, _, env = world
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert run_main("revoke", "wi-never-seen", "--reason", "INC-8") == 1
    assert "error: nothing to revoke for work item wi-never-seen" in capsys.readouterr().err
    assert run_main("revoke", "wi-never-seen", "--reason", " ") == 1
    assert "error: --reason must say why" in capsys.readouterr().err


def test_reconcile_reports_dead_letters_per_entity_with_an_alert_past_the_age(
    world: tuple[ClaimCheck, InMemoryBus, dict[str, str]], tmp_path: Path
) -> None:
    """With a Service Bus given, the report holds each queue's and subscription's dead-letter count
    and oldest age (read through the management plane as `stats` reads), and an ALERT past the age."""
    _, _, env = world
    with running_emulator(tmp_path) as emulator:
        dead_letter_from_queue(emulator.connection, session_id=f"wi-{uuid.uuid4().hex[:8]}")
        time.sleep(2)  # the alert age below is 1 s: let the dead letter grow older than it
        result = run_ops(
            "reconcile",
            "--connection-string",
            emulator.connection,
            "--stack-outputs",
            str(write_stack_outputs(tmp_path)),
            env=env
            | {
                "CLAIMCHECK_SERVICEBUS_MANAGEMENT_CONNECTION": emulator.management,
                SETTING_NAMES["dead_letter_alert_age_seconds"]: "1",
            },
        )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    by_entity = {entry["entity"]: entry for entry in report["dead_letters"]}
    assert set(by_entity) == {"documents", "results/audit", "results/replays"}
    assert by_entity["documents"]["count"] == 1
    assert by_entity["documents"]["oldest_age_seconds"] >= 1
    audit = by_entity["results/audit"]
    assert (audit["count"], audit["oldest_age_seconds"]) == (0, None)
    (alert,) = report["alerts"]
    assert alert.startswith("documents: 1 dead-lettered message(s)")
    assert report["errors"] == []
