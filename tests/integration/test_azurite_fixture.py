"""The Azurite fixture serves the real Blob and Table APIs to the real SDKs."""

from __future__ import annotations

import uuid

from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient


def test_blob_round_trip(storage_connection_string: str) -> None:
    """A blob written through the real SDK reads back byte for byte."""
    service = BlobServiceClient.from_connection_string(storage_connection_string)
    container = service.create_container(f"smoke{uuid.uuid4().hex[:8]}")
    container.upload_blob("b", b"hello")
    assert container.download_blob("b").readall() == b"hello"


def test_table_round_trip(storage_connection_string: str) -> None:
    """An entity written through the real SDK reads back."""
    service = TableServiceClient.from_connection_string(storage_connection_string)
    table = service.create_table(f"smoke{uuid.uuid4().hex[:8]}")
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "value": 1})
    assert table.get_entity("p", "r")["value"] == 1
