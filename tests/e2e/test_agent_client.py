"""claimcheck.client against the local stack: one write per key, and bounded waiting that honours
Retry-After (the lagging write path is conftest's HeldBroker, a real Bus behind the producer's port)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from claimcheck import ClaimCheck
from claimcheck.client import ApiError, ClaimCheckClient, Receipt
from claimcheck.settings import Settings

from local.stack import LocalStack

from .conftest import HeldBroker
from .journey import SAMPLES, TEST_IDENTITY

SAMPLE = SAMPLES / "service-agreement.txt"


def _client(stack: LocalStack, sleep: list[float] | None = None) -> ClaimCheckClient:
    return ClaimCheckClient(
        stack.api_url, lambda: stack.token(TEST_IDENTITY), sleep=time.sleep if sleep is None else sleep.append
    )


def test_submit_twice_with_one_key_writes_once_and_wait_ends_in_proceed(stack: LocalStack) -> None:
    client, key, tenant = _client(stack), uuid.uuid4().hex, f"t-agent-{uuid.uuid4().hex[:8]}"

    def submit() -> Receipt:
        return client.submit(
            SAMPLE,
            tenant_id=tenant,
            purpose="contract-review",
            classification="internal",
            content_type="text/plain",
            idempotency_key=key,
        )

    first, again = submit(), submit()
    assert (again.work_item_id, again.version, again.replayed) == (first.work_item_id, first.version, True)
    assert not first.replayed
    final = client.wait(first, deadline_seconds=150)
    assert (final.visibility, final.next_action, final.exhausted) == ("version_confirmed", "proceed", False)
    assert final.body["result"]["version"] == first.version


def test_wait_is_bounded_and_honours_retry_after(stack: LocalStack, held_broker: HeldBroker) -> None:
    work_item_id, sleeps = f"wi-{uuid.uuid4().hex}", list[float]()
    producer = ClaimCheck.from_settings(
        Settings(environment="local"), storage_connection=stack.storage_connection_string, bus=held_broker
    ).producer
    with ThreadPoolExecutor(max_workers=1) as pool:
        intake = pool.submit(
            producer.submit,
            SAMPLE.read_bytes(),
            tenant_id=f"t-agent-{uuid.uuid4().hex[:8]}",
            purpose="contract-review",
            classification="internal",
            content_type="text/plain",
            work_item_id=work_item_id,
        )
        assert held_broker.entered.wait(60), "the producer never reached its publish"
        pending = Receipt(work_item_id=work_item_id, version=1, idempotency_key="-", replayed=False, raw={})
        final = _client(stack, sleeps).wait(pending, deadline_seconds=60, max_attempts=3)
        held_broker.release.set()
        intake.result(timeout=60)
    assert (final.visibility, final.next_action, final.exhausted, final.attempts) == (
        "awaiting_visibility",
        "wait",
        True,
        3,
    )
    # Full jitter from 0.5 s would sleep under a second; the API's Retry-After (>= 1 s) wins.
    assert len(sleeps) == 2
    assert all(delay >= 1 for delay in sleeps)


class CuttingProxy:
    """A loopback TCP proxy in front of the stack's API that, while ``cuts`` is above 0, forwards only
    the head and the first bytes of an answer and then drops the connection: a link or front end lost
    mid-answer, after the request itself reached the app."""

    def __init__(self, api_url: str) -> None:
        upstream = urllib.parse.urlsplit(api_url)
        self._upstream = (upstream.hostname or "127.0.0.1", upstream.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.api_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}{upstream.path}"
        self.cuts = 0
        self.cut_answers = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self._listener.accept()
                threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        with client, socket.create_connection(self._upstream) as upstream:
            cut, self.cuts = self.cuts > 0, max(self.cuts - 1, 0)
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            answer = b""
            while chunk := upstream.recv(65536):
                answer += chunk
                head_end = answer.find(b"\r\n\r\n")
                if cut and head_end >= 0 and len(answer) > head_end + 4 + 5:
                    client.sendall(answer[: head_end + 4 + 5])  # the head and five bytes of the body
                    self.cut_answers += 1
                    client.shutdown(socket.SHUT_RDWR)  # now, though the request pump still reads it
                    return
                if not cut:
                    client.sendall(chunk)

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                target.sendall(chunk)


def test_an_answer_cut_off_midway_is_no_answer_retried_with_the_same_key(stack: LocalStack) -> None:
    """Found in review: an answer whose body broke off (http.client.IncompleteRead) escaped the client
    as an exception, so a submission that the stack had applied was not resent with its key and a wait
    ended in a crash. It is "no answer", like a refused connection: resent (same key), polled again."""
    proxy = CuttingProxy(stack.api_url)
    try:
        client = ClaimCheckClient(proxy.api_url, lambda: stack.token(TEST_IDENTITY))
        proxy.cuts = 1
        receipt = client.submit(
            SAMPLE,
            tenant_id=f"t-agent-{uuid.uuid4().hex[:8]}",
            purpose="contract-review",
            classification="internal",
            content_type="text/plain",
        )
        # The cut answer's request was applied: the resend with the same key got its receipt.
        assert (proxy.cut_answers, receipt.version, receipt.replayed) == (1, 1, True)
        proxy.cuts = 1
        final = client.wait(receipt, deadline_seconds=150)
        assert proxy.cut_answers == 2
        assert (final.visibility, final.exhausted) == ("version_confirmed", False)
    finally:
        proxy.close()


def test_wait_on_an_address_that_is_not_the_status_route_is_refused_not_polled(stack: LocalStack) -> None:
    """Found in review: an answer naming no next action (the 404 of a route that does not exist, e.g. an
    API URL without its /api) was polled until the deadline and reported as "wait", so an agent kept
    waiting for a state that could never come. It is a refusal, raised at the first answer."""
    client = ClaimCheckClient(f"{stack.api_url}/v0", lambda: stack.token(TEST_IDENTITY), sleep=lambda _: None)
    with pytest.raises(ApiError) as refused:
        client.wait(Receipt(f"wi-{uuid.uuid4().hex}", 1, "", False, {}), deadline_seconds=60, max_attempts=3)
    assert refused.value.status == 404
