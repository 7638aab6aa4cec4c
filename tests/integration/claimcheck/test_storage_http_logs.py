"""The storage clients' per-request HTTP logs against Azurite, through the app's own clients
(claimcheck.adapters.azure.connect_storage).

azure-core's HttpLoggingPolicy logs every request (its URL names the stored object) and response at
INFO by default, the level the Azure Functions Python worker gives the root logger: each storage request
of the hot path would format two records and ship them to the host. The app's clients log them at
DEBUG: nothing at INFO or above, while debug logging still shows them (so the policy is still in the
pipeline, and a test would notice an SDK that ignored the option: its records would be at INFO again).
The request hook still sees every request, and the retry and authentication policies are still there.
"""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.pipeline.policies import HttpLoggingPolicy, RetryPolicy
from azure.storage.blob import ExponentialRetry
from claimcheck import Settings
from claimcheck.adapters.azure import AzureStorage, connect_storage, provision_storage
from claimcheck.integrity import Hashed
from claimcheck.storage import Key

from local.storage_requests import StorageRequests

HTTP_LOGGER = "azure.core.pipeline.policies.http_logging_policy"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def http_records() -> Iterator[Records]:
    """Every record of azure-core's HTTP logging policy, whatever level it is logged at."""
    logger = logging.getLogger(HTTP_LOGGER)
    handler, previous = Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


def _round_trip(storage: AzureStorage, settings: Settings) -> None:
    """A few requests of each kind the hot path sends: table insert, read, replace; blob put, tag, read,
    delete; and a status read."""
    key = Key(f"http-logs-{uuid.uuid4().hex}", "r")
    etag = storage.tables.registry.insert_if_absent(key, {"state": "preparing"})
    assert storage.tables.registry.get(key) is not None
    storage.tables.registry.replace_if_match(key, {"state": "available"}, etag)
    assert storage.status_tables.registry.get(key) is not None
    store = storage.store.default()
    ref = f"http-logs-{uuid.uuid4().hex}"
    data = Hashed.of(b"http logging probe\n")
    uploaded = store.upload_provisional(ref, data, content_type="text/plain", max_bytes=1024)
    store.activate(ref)
    read = store.open_verified(
        ref, etag=uploaded.etag, length=data.length, sha256=data.sha256, content_type="text/plain"
    )
    assert read.read() == data.data
    assert store.delete(ref)


def test_storage_requests_log_at_debug_only(storage_connection_string: str, http_records: Records) -> None:
    settings = Settings(environment="test")
    provision_storage(settings, storage_connection_string)
    requests = StorageRequests()
    storage = connect_storage(
        settings, storage_connection=storage_connection_string, request_hook=requests.hook
    )
    http_records.records.clear()  # provision_storage's own clients (deploy side) keep the SDK's default
    with requests.measure() as sent:
        _round_trip(storage, settings)
    # The hook still sees every hot-path request (the status reads' client has none: not the hot path).
    assert sent.total == 7, sent.summary()
    levels = {record.levelno for record in http_records.records}
    info = [r.getMessage().splitlines()[0] for r in http_records.records if r.levelno > logging.DEBUG]
    assert levels == {logging.DEBUG}, f"HTTP logging levels {sorted(levels)}, expected DEBUG only: {info}"
    # A request and a response record for each of the 8 requests sent.
    assert len(http_records.records) == 2 * 8


def test_the_sdk_default_would_log_each_request_at_info(storage_connection_string: str) -> None:
    """The baseline the test above departs from: a client built without the option logs at INFO."""
    from azure.data.tables import TableServiceClient

    settings = Settings(environment="test")
    provision_storage(settings, storage_connection_string)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger(HTTP_LOGGER)
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        table = TableServiceClient.from_connection_string(storage_connection_string).get_table_client(
            settings.registry_table
        )
        assert list(table.query_entities("PartitionKey eq 'http-logs-none'")) == []
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
    assert "Request URL" in stream.getvalue()


def _policies(client: Any) -> list[Any]:
    # The SDKs keep their pipeline's policies privately (no public accessor); a failure here means the
    # SDK changed shape, and the options above must be checked again.
    pipeline = client._pipeline if hasattr(client, "_pipeline") else client._client._client._pipeline
    return [getattr(policy, "_policy", policy) for policy in pipeline._impl_policies]


def test_the_pipelines_keep_retry_auth_and_logging(storage_connection_string: str) -> None:
    settings = Settings(environment="test")
    storage = connect_storage(settings, storage_connection=storage_connection_string)
    container = storage.staging._container  # the default payload container's client
    table = storage.tables.registry._client  # type: ignore[attr-defined]
    status = storage.status_tables.registry._client  # type: ignore[attr-defined]
    for client, retry in ((container, ExponentialRetry), (table, RetryPolicy), (status, RetryPolicy)):
        policies = _policies(client)
        names = [type(policy).__name__ for policy in policies]
        assert any(isinstance(policy, retry) for policy in policies), names
        assert any("Credential" in name or "SharedKey" in name for name in names), names
        logging_policies = [policy for policy in policies if isinstance(policy, HttpLoggingPolicy)]
        assert [policy.http_logging_level for policy in logging_policies] == [logging.DEBUG], names
