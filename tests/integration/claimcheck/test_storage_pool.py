"""The storage clients' connection pool against Azurite: more storage calls at once than requests'
default pool of 10 connections, through the app's own clients (claimcheck.adapters.azure).

With the pool at requests' default every connection beyond 10 is discarded after its call (urllib3's
"Connection pool is full" warning) and a new one is opened for the next; with the setting's pool none
is. Both runs first prove that more than 10 connections were really in use at once, else they would
prove nothing.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from claimcheck import Settings
from claimcheck.adapters.azure import connect_storage, provision_storage
from claimcheck.storage import Key

CALLERS = 32  # the local host's documents sessions at once (functions/host.json maxConcurrentSessions)
ROUNDS = 4
REQUESTS_DEFAULT_POOL = 10


def _concurrent_reads(settings: Settings, connection: str) -> None:
    storage = connect_storage(settings, storage_connection=connection)
    start = threading.Barrier(CALLERS)

    def reads(caller: int) -> None:
        for round_ in range(ROUNDS):
            start.wait(timeout=120)  # every round's calls leave together
            assert storage.tables.registry.get(Key(f"pool-{caller}", f"round-{round_}")) is None

    with ThreadPoolExecutor(CALLERS) as callers:
        for outcome in [callers.submit(reads, caller) for caller in range(CALLERS)]:
            outcome.result()


@pytest.mark.parametrize(
    ("pool_connections", "discards"),
    [(None, False), (REQUESTS_DEFAULT_POOL, True)],
    ids=["settings-default", "requests-default"],
)
def test_concurrent_storage_calls_keep_their_connections(
    storage_connection_string: str,
    caplog: pytest.LogCaptureFixture,
    pool_connections: int | None,
    discards: bool,
) -> None:
    settings = Settings(environment="test")
    if pool_connections is not None:
        settings = Settings(environment="test", storage_pool_connections=pool_connections)
    provision_storage(settings, storage_connection_string)
    with caplog.at_level(logging.DEBUG, logger="urllib3.connectionpool"):
        caplog.clear()
        _concurrent_reads(settings, storage_connection_string)
    messages = [r.getMessage() for r in caplog.records if r.name == "urllib3.connectionpool"]
    opened = [m for m in messages if m.startswith("Starting new HTTP connection")]
    full = [m for m in messages if m.startswith("Connection pool is full")]
    assert len(opened) > REQUESTS_DEFAULT_POOL, "the calls never needed more than the default pool"
    assert bool(full) is discards, f"{len(opened)} connections opened, {len(full)} discarded"
