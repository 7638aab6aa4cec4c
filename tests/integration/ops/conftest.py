"""One embedded Service Bus emulator for the ops CLI tests that share its entities, and one local
token issuer that every command gets its bearer token from (CLAIMCHECK_TOKEN_ISSUER)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from local.identity import SigningKey, TokenMinter
from local.identity.server import make_server
from local.ports import free_port
from tests.integration.ops.emulator import running_emulator


@pytest.fixture(scope="session")
def token_minter() -> Iterator[TokenMinter]:
    """The local issuer, served on a free loopback port for the session."""
    port = free_port()
    minter = TokenMinter(SigningKey.generate(), base_url=f"http://127.0.0.1:{port}")
    server = make_server(minter, port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield minter
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def token_issuer(token_minter: TokenMinter, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CLAIMCHECK_TOKEN_ISSUER", token_minter.issuer)
    return token_minter.issuer


@pytest.fixture(scope="session")
def servicebus_connection(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Connection string of an emulator serving `documents` (sessions) and `results` (audit, replays).

    Tests share it, so each one works on its own session id and message ids, never on totals.
    """
    with running_emulator(tmp_path_factory.mktemp("ops-emulator")) as emulator:
        yield emulator.connection
