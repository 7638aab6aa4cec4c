"""Intake (docs/architecture.md §4): validate → version → provisional write with hashing → registry →
publish → activate only after the publish is confirmed → receipt.

A crash between any two steps leaves something the reconciler finds: a provisional-tagged object
without a record, a ``preparing`` record (publish not confirmed), a ``ref_published`` record
(activation not finished), or a reserved-but-unconfirmed work item version (a harmless gap).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from claimcheck import telemetry
from claimcheck.concurrently import all_three, both
from claimcheck.envelope import IDENTIFIER, IDENTIFIER_RULE, Checksum, Envelope
from claimcheck.errors import (
    ClaimCheckError,
    IntakeRejected,
    PayloadStoreError,
    PublishNotConfirmed,
)
from claimcheck.intake_payload import Prefixed, check_type, intake_answer, whole_if_small
from claimcheck.integrity import Hashed, Readable, read_up_to
from claimcheck.messages import Bus
from claimcheck.policy import (
    Classification,
    PurposePolicy,
    base_content_type,
    check_intake,
    check_length,
    travels_inline,
)
from claimcheck.provenance import message_sha256
from claimcheck.receipts import IntakeReceipt, WriteReceipt
from claimcheck.refs import new_payload_ref
from claimcheck.registry import PayloadRecord, PayloadRegistry
from claimcheck.resilience import CircuitBreaker, CircuitOpen, is_outage
from claimcheck.routing import PayloadStores
from claimcheck.settings import Settings
from claimcheck.states import PayloadState
from claimcheck.storage import UploadedObject
from claimcheck.telemetry import Stage, check_tracestate, intake_span, stage
from claimcheck.workitems import FIRST_VERSION, WorkItemRecord, WorkItemStore

log = logging.getLogger(__name__)

PRIORITIES = frozenset({"high", "normal"})
TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")


@dataclass(frozen=True)
class _Submission:
    tenant_id: str
    purpose: str
    classification: Classification
    content_type: str
    work_item_id: str
    version: int
    priority: str
    document_type: str | None
    review_required: bool
    correlation_id: str | None
    policy: PurposePolicy
    now: datetime
    reserved: WorkItemRecord  # the work item row as the reservation wrote it (conditions the confirm)


class Producer:
    def __init__(
        self,
        *,
        settings: Settings,
        stores: PayloadStores,
        registry: PayloadRegistry,
        work_items: WorkItemStore,
        bus: Bus,
        purposes: Mapping[str, PurposePolicy],
        identity: str,
        clock: Callable[[], datetime],
    ) -> None:
        self._settings = settings
        self._stores = stores
        self._registry = registry
        self._work_items = work_items
        self._bus = bus
        self._purposes = purposes
        self._identity = identity
        self._clock = clock
        # While Service Bus is known to be down, refuse at once (503 + Retry-After) before writing
        # anything, instead of letting every request wait out its own publish timeout.
        self._breaker = CircuitBreaker(
            "publishing to Service Bus",
            log,
            cool_down=timedelta(seconds=settings.publish_cool_down_seconds),
        )

    @intake_span
    def submit(
        self,
        source: Readable | bytes,
        *,
        tenant_id: str,
        purpose: str,
        classification: str,
        content_type: str,
        work_item_id: str | None = None,
        priority: str = "normal",
        document_type: str | None = None,
        review_required: bool = False,
        correlation_id: str | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
        if_match: int | None = None,
        require_if_match: bool = False,
    ) -> IntakeReceipt:
        """Accept one document; raise an ``IntakeRejected`` leaf for bad input (nothing is kept then).

        ``if_match``/``require_if_match``: the conditional write of docs/architecture.md §8 (the HTTP route
        always requires it for an existing work item; ``WorkItemStore.reserve`` checks it).
        """
        declared = len(source) if isinstance(source, bytes) else None
        policy, level = check_intake(
            self._purposes,
            tenant_id=tenant_id,
            purpose=purpose,
            classification=classification,
            content_type=content_type,
            declared_length=declared,
            max_payload_bytes=self._settings.max_payload_bytes,
        )
        if self._breaker.is_open_now():
            raise self._unavailable()
        generated = work_item_id is None  # a fresh id: nobody else can hold its row
        work_item_id = work_item_id or f"wi-{uuid.uuid4().hex}"
        for name, value in (
            ("tenant_id", tenant_id),
            ("work_item_id", work_item_id),
            ("correlation_id", correlation_id),
            ("document_type", document_type),
        ):
            if value is not None and not IDENTIFIER.fullmatch(value):
                raise IntakeRejected(f"{name} {IDENTIFIER_RULE}")
        if traceparent is not None and not TRACEPARENT.fullmatch(traceparent):
            raise IntakeRejected("traceparent is not a W3C trace context traceparent")
        if tracestate is not None:
            _check_tracestate(tracestate)
        if priority not in PRIORITIES:
            raise IntakeRejected(f"priority must be one of {sorted(PRIORITIES)}")
        stream: Readable = io.BytesIO(source) if isinstance(source, bytes) else source
        inline: bytes | None = None
        if not level.sensitive:
            head = read_up_to(stream, self._settings.inline_threshold_bytes + 1)
            if travels_inline(level, len(head), self._settings.inline_threshold_bytes):
                check_length(len(head), self._settings.max_payload_bytes)
                check_type(content_type, head)
                inline = head
            else:
                stream = Prefixed(head, stream)
        now = self._clock()
        reserve = functools.partial(
            self._work_items.reserve,
            work_item_id,
            tenant_id=tenant_id,
            purpose=purpose,
            now=now,
            if_match=if_match,
            require_if_match=require_if_match,
            in_flight=timedelta(seconds=self._settings.visibility_window_seconds),
            fresh=generated,
        )
        ref = None if inline is not None else new_payload_ref()
        uploaded: UploadedObject | None = None
        registered: PayloadRecord | None = None
        if ref is not None:
            payload = whole_if_small(stream, content_type, self._settings.max_payload_bytes)
            record = functools.partial(
                self._new_record,
                ref,
                work_item_id=work_item_id,
                tenant_id=tenant_id,
                purpose=purpose,
                classification=level,
                content_type=content_type,
                now=now,
                grant_lifetime=policy.grant_lifetime,
            )
            if generated:
                # A generated id cannot be taken (its first version is FIRST_VERSION), so its reservation,
                # the upload and (payload already hashed) the registry record are independent.
                reservation, uploaded, registered = self._store(
                    ref,
                    payload,
                    purpose,
                    content_type,
                    functools.partial(record, version=FIRST_VERSION),
                    reserve,
                )
                assert reservation is not None
                assert reservation.pending_version == FIRST_VERSION
                reserved = reservation
            else:
                # A caller's id may be refused (taken, If-Match): reserve before storing anything.
                reserved = reserve()
                try:
                    _, uploaded, registered = self._store(
                        ref,
                        payload,
                        purpose,
                        content_type,
                        functools.partial(record, version=reserved.pending_version),
                    )
                except BaseException:
                    # Refused while streaming (a body over one chunk is type-checked as it uploads) or
                    # Storage failing: nothing was published, so the version is given back at once
                    # instead of blocking the corrected write as "in flight" (and then being skipped).
                    with contextlib.suppress(ClaimCheckError):
                        self._work_items.release(reserved)
                    raise
        else:
            reserved = reserve()
        version = reserved.pending_version
        telemetry.describe(work_item_id, version, purpose)
        submission = _Submission(
            tenant_id=tenant_id,
            purpose=purpose,
            classification=level,
            content_type=content_type,
            work_item_id=work_item_id,
            version=version,
            priority=priority,
            document_type=document_type,
            review_required=review_required,
            correlation_id=correlation_id,
            policy=policy,
            now=now,
            reserved=reserved,
        )
        if inline is not None:
            return self._submit_inline(submission, inline)
        assert ref is not None
        assert uploaded is not None
        return self._submit_by_reference(submission, ref, uploaded, registered)

    def _upload(self, ref: str, stream: Readable | Hashed, purpose: str, content_type: str) -> UploadedObject:
        # The purpose's own container when it has one (claimcheck.routing), else the shared one.
        store = self._stores.for_purpose(purpose)
        try:
            with stage(Stage.UPLOAD):
                return store.upload_provisional(
                    ref, stream, content_type=content_type, max_bytes=self._settings.max_payload_bytes
                )
        except PayloadStoreError as exc:
            raise intake_answer(exc) from exc

    def _store(
        self,
        ref: str,
        payload: Readable | Hashed,
        purpose: str,
        content_type: str,
        record: Callable[..., PayloadRecord],
        reserve: Callable[[], WorkItemRecord] | None = None,
    ) -> tuple[WorkItemRecord | None, UploadedObject, PayloadRecord | None]:
        """Upload ``payload``, at once with ``reserve`` (a generated id's reservation) and, when the
        payload is already hashed (its length and sha256 known before any request), its registry record
        in state ``preparing``: the record's object ETag is written with the ``ref_published`` move, and
        no consumer reads a ``preparing`` record. The record is still durable before the publish.

        A failure of any of them removes a stored object at once (else the reconciler's sweep of
        unregistered provisional objects would) and a generated id's reservation (nobody was given that
        id); a ``preparing`` record left behind is an orphan the reconciler removes after its grace.
        """
        stored: list[UploadedObject] = []
        reservations: list[WorkItemRecord] = []

        def upload() -> UploadedObject:
            stored.append(self._upload(ref, payload, purpose, content_type))
            return stored[0]

        def reserve_fresh() -> WorkItemRecord:
            assert reserve is not None
            reservations.append(reserve())
            return reservations[0]

        def register() -> PayloadRecord | None:
            if not isinstance(payload, Hashed):
                return None  # length and sha256 come out of the upload pass
            with stage(Stage.REGISTRY):
                return self._registry.create(
                    record(length=payload.length, sha256=payload.sha256, object_etag="")
                )

        # The upload on this thread: a transfer of several chunks stages one block while it reads and
        # hashes the next on the pool, which a pool thread could not (a nested both runs sequentially).
        try:
            if reserve is None:
                uploaded, registered = both(upload, register)
                return None, uploaded, registered
            uploaded, reserved, registered = all_three(upload, reserve_fresh, register)
            return reserved, uploaded, registered
        except BaseException:
            if stored:
                # Storage failing too: the reconciler's sweep removes the unregistered object.
                with contextlib.suppress(ClaimCheckError):
                    self._stores.for_purpose(purpose).delete(ref)
            for reservation in reservations:  # else a row of an id nobody knows, for ever
                with contextlib.suppress(ClaimCheckError):
                    self._work_items.release_fresh(reservation)
            raise

    def _new_record(
        self,
        ref: str,
        *,
        work_item_id: str,
        tenant_id: str,
        purpose: str,
        classification: Classification,
        content_type: str,
        length: int,
        sha256: str,
        version: int,
        object_etag: str,
        now: datetime,
        grant_lifetime: timedelta,
    ) -> PayloadRecord:
        return PayloadRecord(
            ref=ref,
            work_item_id=work_item_id,
            tenant_id=tenant_id,
            purpose=purpose,
            classification=classification.value,
            environment=self._settings.environment,
            content_type=content_type,
            content_length=length,
            sha256=sha256,
            version=version,
            object_etag=object_etag,
            owner=self._identity,
            created_at=now,
            expires_at=now + grant_lifetime,
            state=PayloadState.PREPARING,
            updated_at=now,
        )

    def _submit_inline(self, submission: _Submission, payload: bytes) -> IntakeReceipt:
        sha256 = hashlib.sha256(payload).hexdigest()
        envelope = self._envelope(submission, ref=None, inline=payload, length=len(payload), sha256=sha256)
        published = self._publish(submission, envelope)
        return self._accepted(submission, self._confirm(submission, envelope, published, object_etag=None))

    def _submit_by_reference(
        self, submission: _Submission, ref: str, uploaded: UploadedObject, registered: PayloadRecord | None
    ) -> IntakeReceipt:
        store = self._stores.for_purpose(submission.purpose)
        if registered is not None:
            # Recorded while the bytes uploaded: the ETag the consumers read on goes with the next move.
            record = replace(registered, object_etag=uploaded.etag)
        else:
            with stage(Stage.REGISTRY):
                record = self._registry.create(
                    self._new_record(
                        ref,
                        work_item_id=submission.work_item_id,
                        tenant_id=submission.tenant_id,
                        purpose=submission.purpose,
                        classification=submission.classification,
                        content_type=submission.content_type,
                        length=uploaded.length,
                        sha256=uploaded.sha256,
                        version=submission.version,
                        object_etag=uploaded.etag,
                        now=submission.now,
                        grant_lifetime=submission.policy.grant_lifetime,
                    )
                )
        envelope = self._envelope(
            submission, ref=ref, inline=None, length=uploaded.length, sha256=uploaded.sha256
        )
        published = self._publish(submission, envelope)
        now = self._clock()
        # The publish is confirmed: the record's move to available (with the object's ETag), the tag's
        # activation and the version's confirmation are independent requests, all at once. What a crash
        # or a failure in between leaves, the reconciler finishes: an available record whose object is
        # still tagged provisional is activated again; a preparing record whose version the work item
        # confirmed with this ref moves to ref_published (activation then finishes as usual) instead of
        # being removed as an orphan. A consumer that sees the version before the record's move polls
        # briefly (not yet visible), as it does for a message ahead of its confirmation.
        with stage(Stage.ACTIVATE):
            receipt, _, _ = all_three(
                lambda: self._confirm(submission, envelope, published, object_etag=uploaded.etag),
                lambda: self._registry.move(record, PayloadState.AVAILABLE, now=now),
                lambda: store.activate(ref),
            )
        return self._accepted(submission, receipt)
        return receipt

    def _envelope(
        self, submission: _Submission, *, ref: str | None, inline: bytes | None, length: int, sha256: str
    ) -> Envelope:
        return Envelope(
            work_item_id=submission.work_item_id,
            payload_ref=ref,
            payload_inline=inline,
            payload_version=submission.version,
            content_type=base_content_type(submission.content_type),
            content_length=length,
            checksum=Checksum("sha256", sha256),
            classification=submission.classification,
            tenant_id=submission.tenant_id,
            purpose=submission.purpose,
            environment=self._settings.environment,
            created_at=submission.now,
            expires_at=submission.now + submission.policy.grant_lifetime,
            correlation_id=submission.correlation_id,
        )

    def _publish(self, submission: _Submission, envelope: Envelope) -> str:
        """Publish the envelope's message; answers its digest (claimcheck.provenance), which the receipt
        records: the consumer accepts only that message for this version."""
        try:
            self._breaker.before_call()
            with stage(Stage.PUBLISH):
                # The message carries the publish span's trace context (the caller's traceparent and
                # tracestate when nothing records spans): the consumer's span links to it.
                message = envelope.to_message(
                    priority=submission.priority,
                    document_type=submission.document_type,
                    review_required=submission.review_required,
                    **telemetry.message_context(),
                )
                self._bus.publish(self._settings.documents_queue, message)
        except (
            ClaimCheckError,
            CircuitOpen,
        ) as exc:  # the bus's errors (adapters/sdk_errors.py), the breaker
            if isinstance(exc, CircuitOpen):
                pass  # another request is trying the broker right now
            elif is_outage(exc):
                self._breaker.failed(exc)
            else:
                self._breaker.succeeded()  # the broker answered: it is up, it refused this message
            grace = timedelta(seconds=self._settings.orphan_grace_seconds)
            log.warning(
                "ALERT %s v%d: object written, publish not confirmed (%s); no worker got access; "
                "the provisional object is removed by reconciliation after %s",
                submission.work_item_id,
                submission.version,
                type(exc).__name__,
                grace,
            )
            raise PublishNotConfirmed(
                "the queue did not confirm the message; submit again",
                retry_after=self._breaker.retry_after(),
            ) from exc
        self._breaker.succeeded()
        return message_sha256(envelope, message.session_id, message.application_properties)

    def _unavailable(self) -> PublishNotConfirmed:
        retry_after = self._breaker.retry_after()
        return PublishNotConfirmed(
            f"Service Bus is unavailable; nothing was stored; submit again in {retry_after:.0f} s",
            retry_after=retry_after,
        )

    def _confirm(
        self, submission: _Submission, envelope: Envelope, published: str, *, object_etag: str | None
    ) -> IntakeReceipt:
        accepted_at = self._clock()
        receipt = WriteReceipt(
            work_item_id=submission.work_item_id,
            version=submission.version,
            transport="reference" if envelope.payload_ref else "inline",
            payload_ref=envelope.payload_ref,
            object_etag=object_etag,
            request_id=uuid.uuid4().hex,
            message_id=envelope.message_id,
            accepted_at=accepted_at,
            visibility_deadline=accepted_at + timedelta(seconds=self._settings.visibility_window_seconds),
            content_length=envelope.content_length,
            sha256=envelope.checksum.value,
            message_sha256=published,
        )
        etag = self._work_items.confirm_version(
            submission.work_item_id, submission.version, receipt, now=accepted_at, known=submission.reserved
        )
        return IntakeReceipt.confirmed(receipt, record_etag=etag)

    def _accepted(self, submission: _Submission, receipt: IntakeReceipt) -> IntakeReceipt:
        """Log and count an accepted intake (on the calling thread: the intake span is current)."""
        log.info("accepted %s v%d (%s)", submission.work_item_id, submission.version, receipt.transport)
        telemetry.accepted(submission.purpose, receipt.transport, receipt.content_length)
        return receipt


def _check_tracestate(tracestate: str) -> None:
    try:
        check_tracestate(tracestate)
    except ValueError as exc:
        raise IntakeRejected(str(exc)) from None
