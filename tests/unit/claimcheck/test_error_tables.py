"""The payload store speaks storage; the producer and the consumer each translate it in one table."""

from __future__ import annotations

import pytest
from claimcheck.consumer_outcomes import STORE_REJECTIONS, dead_letter_for, rejection_for
from claimcheck.errors import (
    ClaimCheckError,
    ContentTypeMismatch,
    EmptyPayload,
    ForbiddenContentType,
    IntegrityFailed,
    ObjectChanged,
    ObjectEmpty,
    ObjectExists,
    ObjectMismatch,
    ObjectNotFound,
    ObjectTooLarge,
    PayloadMissing,
    PayloadStoreError,
    PayloadTooLarge,
)
from claimcheck.intake_payload import intake_answer
from claimcheck.outcome import DeadLetterReason

LEAVES = (ObjectNotFound, ObjectExists, ObjectChanged, ObjectMismatch, ObjectTooLarge, ObjectEmpty)


def test_every_payload_store_error_is_a_claimcheck_error_with_a_consumer_answer() -> None:
    assert set(PayloadStoreError.__subclasses__()) == set(LEAVES)
    assert set(STORE_REJECTIONS) == set(LEAVES)
    assert all(issubclass(leaf, ClaimCheckError) for leaf in LEAVES)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ObjectNotFound("ref_x"), DeadLetterReason.PAYLOAD_MISSING),
        (
            ObjectChanged("the stored object changed while it was being read"),
            DeadLetterReason.INTEGRITY_FAILED,
        ),
        (ObjectMismatch("sha256", "the sha256 differs"), DeadLetterReason.INTEGRITY_FAILED),
        (ObjectMismatch("length", "11 bytes, the record says 12"), DeadLetterReason.INTEGRITY_FAILED),
        (ObjectMismatch("content_type", "declared text/plain"), DeadLetterReason.CONTENT_TYPE_MISMATCH),
    ],
)
def test_the_consumer_dead_letters_store_errors_with_their_reason(
    error: PayloadStoreError, reason: DeadLetterReason
) -> None:
    outcome = dead_letter_for(error)
    assert outcome.reason is reason
    if not isinstance(error, ObjectNotFound):
        assert outcome.description == str(error)  # the store's own words: fields, never bytes


def test_a_missing_object_is_described_without_its_reference() -> None:
    rejected = rejection_for(ObjectNotFound("ref_secretish"))
    assert isinstance(rejected, PayloadMissing)
    assert "ref_secretish" not in str(rejected)


def test_integrity_leaves_keep_their_dead_letter_classes() -> None:
    assert isinstance(rejection_for(ObjectChanged("x")), IntegrityFailed)
    assert isinstance(rejection_for(ObjectMismatch("content_type", "x")), ContentTypeMismatch)


@pytest.mark.parametrize(
    ("error", "answer", "status"),
    [
        (ObjectTooLarge(100), PayloadTooLarge, 413),
        (ObjectEmpty("the payload is empty"), EmptyPayload, 400),
        (ObjectMismatch("content_type", "declared application/pdf"), ForbiddenContentType, 415),
    ],
)
def test_the_producer_answers_store_refusals_with_http_leaves(
    error: PayloadStoreError, answer: type[Exception], status: int
) -> None:
    translated = intake_answer(error)
    assert isinstance(translated, answer)
    assert getattr(translated, "http_status", None) == status
    assert str(translated) == str(error)


def test_a_store_error_that_is_not_the_callers_doing_stays_itself() -> None:
    collision = ObjectExists("an object already exists under this reference")
    assert intake_answer(collision) is collision


def test_the_adapter_edge_wraps_sdk_errors_without_their_text() -> None:
    from azure.core.exceptions import HttpResponseError, ServiceRequestError
    from claimcheck.adapters.sdk_errors import storage_errors
    from claimcheck.errors import StorageFailed, StorageUnavailable
    from claimcheck.resilience import is_outage

    with pytest.raises(StorageUnavailable) as unreachable, storage_errors("table t read"):
        raise ServiceRequestError("connection refused to https://account.example/?sig=secret")
    assert isinstance(unreachable.value.__cause__, ServiceRequestError)
    assert is_outage(unreachable.value)
    assert "sig=" not in str(unreachable.value)
    with pytest.raises(StorageFailed) as refused, storage_errors("blob read"):
        raise HttpResponseError("AuthorizationFailure: https://account.example/?sig=secret")
    assert not is_outage(refused.value)
    assert "sig=" not in str(refused.value)
    assert str(refused.value).startswith("blob read: storage refused (HttpResponseError")


def test_the_bus_adapter_edge_wraps_service_bus_errors_without_their_text() -> None:
    from azure.core.exceptions import ResourceNotFoundError, ServiceRequestError
    from azure.servicebus.exceptions import MessageSizeExceededError, ServiceBusConnectionError
    from claimcheck.adapters.sdk_errors import bus_errors
    from claimcheck.errors import BrokerFailed, BrokerUnavailable
    from claimcheck.resilience import is_outage

    for unreachable in (
        ServiceBusConnectionError(message="amqps://ns.example/?sig=secret refused"),
        ServiceRequestError("connection refused to https://ns.example/?sig=secret"),  # management plane
    ):
        with pytest.raises(BrokerUnavailable) as down, bus_errors("publish to documents"):
            raise unreachable
        assert down.value.__cause__ is unreachable
        assert is_outage(down.value)
        assert "sig=" not in str(down.value)
    with pytest.raises(BrokerFailed) as refused, bus_errors("publish to documents"):
        raise MessageSizeExceededError(message="body of 300 KB at https://ns.example/?sig=secret")
    assert not is_outage(refused.value)
    assert str(refused.value) == "publish to documents: Service Bus refused (MessageSizeExceededError)"
    with pytest.raises(BrokerFailed) as missing, bus_errors("dead-letter counts"):
        raise ResourceNotFoundError("queue https://ns.example/documents?sig=secret")
    assert "sig=" not in str(missing.value)
