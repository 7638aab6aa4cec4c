"""The consumer's read is bound to the registry record, and to its own identity (issue 8), on Azurite.

A same-tenant envelope for work item A that carries work item B's reference (and B's version,
length and checksum) is access_denied: B's object, registry state and result stay untouched, and A's
own message is still processed with A's own bytes. So is an envelope whose version differs from its
reference's record; a superseded version (its own reference, a newer version confirmed) stays
version_mismatch.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from claimcheck import Complete, DeadLetter, DeadLetterReason, InboundMessage, Settings
from claimcheck.policy import DEFAULT_PURPOSES
from claimcheck.service import with_consumers
from claimcheck.settings import (
    CONSUMER_IDENTITY_SETTING,
    PURPOSE_CONSUMERS_SETTING,
    SettingsError,
    consumer_settings,
)
from claimcheck.testing import consume_and_settle

from tests.integration.claimcheck.conftest import Harness, document
from tests.integration.claimcheck.test_consumer import submit

Build = Callable[..., Harness]


def _as_work_item(message: InboundMessage, work_item_id: str) -> InboundMessage:
    return _forged(message, work_item_id=work_item_id)


def _forged(message: InboundMessage, **changes: object) -> InboundMessage:
    body = json.loads(message.body) | changes
    return InboundMessage(
        body=json.dumps(body).encode(),
        message_id="forged-same-tenant",
        delivery_count=1,
        session_id=body["work_item_id"],
        correlation_id=None,
        application_properties=dict(message.application_properties),
        enqueued_time=None,
    )


def test_another_work_items_reference_in_a_same_tenant_envelope_is_access_denied(make_harness: Build) -> None:
    harness = make_harness()
    payload_a, payload_b = document(40_000, marker="DOC-A"), document(60_000, marker="DOC-B")
    receipt_a = submit(harness, payload_a, work_item_id="wi-a")
    message_a = harness.delivery()
    receipt_b = submit(harness, payload_b, work_item_id="wi-b")
    message_b = harness.delivery()
    registry_before = sorted(
        (row["PartitionKey"], row["state"]) for row in harness.rows(harness.settings.registry_table)
    )

    outcome = consume_and_settle(harness.claimcheck.consumer, _as_work_item(message_b, "wi-a"))

    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.ACCESS_DENIED
    assert harness.analyzer.seen == []
    assert harness.results() == []
    assert sorted(harness.blob_names()) == sorted([str(receipt_a.payload_ref), str(receipt_b.payload_ref)])
    registry_after = sorted(
        (row["PartitionKey"], row["state"]) for row in harness.rows(harness.settings.registry_table)
    )
    assert registry_after == registry_before
    for receipt in (receipt_a, receipt_b):
        view = harness.claimcheck.status.get(receipt.work_item_id)
        assert view is not None
        assert (view.state, view.failure_reason) == ("accepted", None)
    # Both real messages still run, each on its own bytes.
    assert consume_and_settle(harness.claimcheck.consumer, message_a) == Complete()
    assert consume_and_settle(harness.claimcheck.consumer, message_b) == Complete()
    assert harness.analyzer.seen == [payload_a, payload_b]


def test_a_version_that_differs_from_the_references_record_is_access_denied(make_harness: Build) -> None:
    """v1's reference in an envelope claiming v2 (the version the work item has confirmed, so it is not
    superseded): access_denied, not version_mismatch; nothing is read, both versions still run."""
    harness = make_harness()
    v1_bytes, v2_bytes = document(40_000, marker="V1"), document(41_000, marker="V2")
    v1 = submit(harness, v1_bytes, work_item_id="wi-versions")
    message_v1 = harness.delivery(0)
    v2 = submit(harness, v2_bytes, work_item_id="wi-versions")
    message_v2 = harness.delivery(1)
    registry_before = sorted(
        (row["PartitionKey"], row["state"]) for row in harness.rows(harness.settings.registry_table)
    )

    outcome = consume_and_settle(harness.claimcheck.consumer, _forged(message_v1, payload_version=v2.version))

    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.ACCESS_DENIED
    assert harness.analyzer.seen == []
    assert harness.results() == []
    assert sorted(harness.blob_names()) == sorted([str(v1.payload_ref), str(v2.payload_ref)])
    registry_after = sorted(
        (row["PartitionKey"], row["state"]) for row in harness.rows(harness.settings.registry_table)
    )
    assert registry_after == registry_before
    # The genuine messages: v2 runs, v1 is the superseded case and keeps its own reason.
    assert consume_and_settle(harness.claimcheck.consumer, message_v2) == Complete()
    superseded = consume_and_settle(harness.claimcheck.consumer, message_v1)
    assert isinstance(superseded, DeadLetter)
    assert superseded.reason is DeadLetterReason.VERSION_MISMATCH
    assert harness.analyzer.seen == [v2_bytes]


def test_a_consumer_identity_the_purpose_does_not_allow_reads_nothing(make_harness: Build) -> None:
    """The same message read by an identity outside the purpose's consumers: access_denied, untouched."""
    harness = make_harness(consumer_identity="claimcheck-consumer-other")
    submit(harness, document(50_000))
    inline = submit(harness, document(500), classification="internal")
    for message in (harness.delivery(0), harness.delivery(1)):
        outcome = consume_and_settle(harness.claimcheck.consumer, message)
        assert isinstance(outcome, DeadLetter)
        assert outcome.reason is DeadLetterReason.ACCESS_DENIED
    assert harness.analyzer.seen == []
    assert inline.transport == "inline"
    assert [row["state"] for row in harness.rows(harness.settings.registry_table)] == ["available"]


def test_allowed_consumers_per_purpose_come_from_settings(make_harness: Build) -> None:
    harness = make_harness(
        consumer_identity="func-claimcheck-dev",
        purpose_consumers={"contract-review": frozenset({"func-claimcheck-dev"})},
    )
    submit(harness, document(50_000))
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()


def test_purpose_consumer_settings_are_parsed_and_checked() -> None:
    env = {
        CONSUMER_IDENTITY_SETTING: "func-a",
        PURPOSE_CONSUMERS_SETTING: json.dumps({"contract-review": ["func-a", "func-b"]}),
    }
    settings = Settings.from_env(env)
    assert settings.consumer_identity == "func-a"
    assert settings.purpose_consumers == {"contract-review": frozenset({"func-a", "func-b"})}
    with pytest.raises(SettingsError, match=PURPOSE_CONSUMERS_SETTING):
        Settings.from_env({PURPOSE_CONSUMERS_SETTING: '{"contract-review": "func-a"}'})
    with pytest.raises(SettingsError, match=r"unknown purposes \['gossip'\]"):
        with_consumers({}, {"gossip": frozenset({"x"})})


def test_consumer_settings_read_back_as_that_identity_for_every_purpose() -> None:
    """What infra/ and the local stack write (one function) is what the app reads; no identity: refused."""
    settings = Settings.from_env(consumer_settings("principal-1", DEFAULT_PURPOSES))
    assert settings.consumer_identity == "principal-1"
    assert settings.purpose_consumers == {purpose: frozenset({"principal-1"}) for purpose in DEFAULT_PURPOSES}
    with pytest.raises(SettingsError, match=CONSUMER_IDENTITY_SETTING):
        consumer_settings("", DEFAULT_PURPOSES)
    with pytest.raises(SettingsError, match=r"unknown purposes \['gossip'\]"):
        consumer_settings("principal-1", DEFAULT_PURPOSES, ["gossip"])


def test_a_purpose_the_stack_does_not_consume_is_read_by_nobody(make_harness: Build) -> None:
    """claimcheck:consumedPurposes without contract-review: the app's own identity may not read it."""
    settings = Settings.from_env(consumer_settings("principal-1", DEFAULT_PURPOSES, ["evidence-archive"]))
    harness = make_harness(consumer_identity="principal-1", purpose_consumers=settings.purpose_consumers)
    submit(harness, document(50_000))
    outcome = consume_and_settle(harness.claimcheck.consumer, harness.delivery())
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.ACCESS_DENIED
    assert harness.analyzer.seen == []
    submit(harness, document(50_000), purpose="evidence-archive")
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()
