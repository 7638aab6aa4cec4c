"""A table insert asks the service not to echo the entity back (``Prefer: return-no-content``), against
Azurite through the app's own clients: the request carries the header, the service applied it (204, no
body to decode), and the answered ETag is the row's (a conditional replace with it succeeds). A
second insert of the key is still refused. Fails if the SDK stops passing the keyword through."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from claimcheck import Settings
from claimcheck.adapters.azure import connect_storage, provision_storage
from claimcheck.adapters.tables import INSERT_PREFERENCE
from claimcheck.errors import RecordExists
from claimcheck.storage import Key


def test_an_insert_is_answered_without_the_entity(storage_connection_string: str) -> None:
    settings = Settings(environment="test")
    provision_storage(settings, storage_connection_string)
    sent: list[tuple[str, str]] = []
    answered: list[tuple[int, bytes]] = []

    def hook(service: str, request: Any) -> None:
        if service == "table" and request.http_request.method == "POST":
            sent.append((service, request.http_request.headers.get("Prefer", "")))

    storage = connect_storage(settings, storage_connection=storage_connection_string, request_hook=hook)
    table = storage.tables.registry
    client = table._client  # type: ignore[attr-defined]
    key = Key(f"prefer-{uuid.uuid4().hex}", "r")

    def response_hook(response: Any) -> None:
        answered.append((response.http_response.status_code, response.http_response.body()))

    # What the service answers to that header: 204 and no body (the SDK's public response hook sees it).
    etag = client.create_entity(
        {"PartitionKey": "probe", "RowKey": uuid.uuid4().hex},
        response_preference=INSERT_PREFERENCE,
        raw_response_hook=response_hook,
    )["etag"]
    assert etag
    assert answered == [(204, b"")]

    # The adapter's insert sends that header, and its ETag is the row's.
    etag = table.insert_if_absent(key, {"state": "preparing", "size": 3})
    assert sent[-1] == ("table", INSERT_PREFERENCE)
    table.replace_if_match(key, {"state": "available", "size": 3}, etag)
    stored = table.get(key)
    assert stored is not None
    assert stored.values["state"] == "available"
    with pytest.raises(RecordExists):
        table.insert_if_absent(key, {"state": "preparing"})
