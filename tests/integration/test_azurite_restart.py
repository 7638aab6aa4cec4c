"""Azurite stops fast yet keeps its data, and starts again on the same ports (what the stack and the
chaos run rely on to stop or restart it)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient

from local.azurite import start_azurite
from local.ports import PortInUse


def test_a_flushed_stop_keeps_blobs_and_entities_for_a_restart_on_the_same_ports(tmp_path: Path) -> None:
    """Written data survives stop(flush=True) after a client connected (when Azurite used to linger),
    and the restarted Azurite serves it on the same endpoints."""
    first = start_azurite(tmp_path)
    try:
        blobs = BlobServiceClient.from_connection_string(first.connection_string)
        blobs.create_container("kept").upload_blob("b", b"still here")
        tables = TableServiceClient.from_connection_string(first.connection_string)
        tables.create_table("kept").create_entity({"PartitionKey": "p", "RowKey": "r", "value": 7})
    finally:
        first.stop(flush=True)
    assert first.process.returncode == 0  # exited on its own after saving, not SIGKILLed

    second = start_azurite(tmp_path, ports=first.ports)
    try:
        assert second.connection_string == first.connection_string
        blobs = BlobServiceClient.from_connection_string(second.connection_string)
        assert blobs.get_blob_client("kept", "b").download_blob().readall() == b"still here"
        tables = TableServiceClient.from_connection_string(second.connection_string)
        assert tables.get_table_client("kept").get_entity("p", "r")["value"] == 7
    finally:
        second.stop(flush=True)


def test_a_restart_on_a_taken_port_is_refused_naming_it(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = int(listener.getsockname()[1])
        with pytest.raises(PortInUse, match=f"port {taken} \\(Azurite table\\) is already in use"):
            start_azurite(tmp_path, ports=(0, 0, taken))
