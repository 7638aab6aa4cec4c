"""Azure Tables adapter of the ``EntityTable`` port (azure-data-tables)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import EdmType, EntityProperty, UpdateMode

from claimcheck.adapters.sdk_errors import storage_errors
from claimcheck.errors import ConcurrencyConflict, RecordExists, RecordNotFound
from claimcheck.storage import Key, StoredEntity

if TYPE_CHECKING:
    from azure.data.tables import TableClient

_INT32 = range(-(2**31), 2**31)
INSERT_PREFERENCE = "return-no-content"
_KEY_PROPERTIES = frozenset({"PartitionKey", "RowKey", "Timestamp"})
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class AzureEntityTable:
    """One Azure table. Keys become PartitionKey/RowKey here and nowhere else; SDK errors become the
    core's ``StoreError`` leaves, or ``StorageUnavailable`` / ``StorageFailed`` (adapters.sdk_errors),
    chained ``from``."""

    def __init__(self, client: TableClient) -> None:
        self._client = client

    def get(self, key: Key) -> StoredEntity | None:
        with self._errors("read"):
            try:
                entity = self._client.get_entity(key.partition, key.row)
            except ResourceNotFoundError:
                return None
        return _stored(entity)

    def insert_if_absent(self, key: Key, values: Mapping[str, Any]) -> str:
        with self._errors("insert"):
            try:
                # Only the ETag is wanted: the service's default answer echoes the whole entity, which
                # the SDK then decodes (about a tenth of an insert's client CPU). The Insert Entity
                # operation's Prefer header turns that off; the SDK passes its keyword through.
                metadata = self._client.create_entity(
                    _encode(key, values), response_preference=INSERT_PREFERENCE
                )
            except ResourceExistsError as exc:
                raise RecordExists(f"{self._client.table_name}: key already taken") from exc
        return str(metadata["etag"])

    def replace_if_match(self, key: Key, values: Mapping[str, Any], etag: str) -> str:
        with self._errors("replace"):
            try:
                metadata = self._client.update_entity(
                    _encode(key, values),
                    mode=UpdateMode.REPLACE,
                    etag=etag,
                    match_condition=MatchConditions.IfNotModified,
                )
            except ResourceModifiedError as exc:
                raise ConcurrencyConflict(
                    f"{self._client.table_name}: record changed since it was read"
                ) from exc
            except ResourceNotFoundError as exc:
                raise RecordNotFound(f"{self._client.table_name}: record is gone") from exc
        return str(metadata["etag"])

    def delete_if_match(self, key: Key, etag: str) -> None:
        with self._errors("delete"):
            try:
                self._client.delete_entity(
                    key.partition, key.row, etag=etag, match_condition=MatchConditions.IfNotModified
                )
            except ResourceModifiedError as exc:
                raise ConcurrencyConflict(
                    f"{self._client.table_name}: record changed since it was read"
                ) from exc

    def scan_where(self, field: str, values: Iterable[str]) -> Iterator[StoredEntity]:
        if not _FIELD.fullmatch(field) or field in _KEY_PROPERTIES:
            raise ValueError(f"cannot scan by {field!r}: not a plain property name")
        wanted = sorted(set(values))
        if not wanted:
            return
        clauses = " or ".join(f"{field} eq @v{index}" for index in range(len(wanted)))
        parameters = {f"v{index}": value for index, value in enumerate(wanted)}
        with self._errors("scan"):
            for entity in self._client.query_entities(clauses, parameters=parameters):
                yield _stored(entity)

    @property
    def _changed(self) -> str:
        return f"{self._client.table_name}: record changed since it was read"

    def _errors(self, operation: str) -> AbstractContextManager[None]:
        return storage_errors(f"table {self._client.table_name} {operation}")


def _encode(key: Key, values: Mapping[str, Any]) -> dict[str, Any]:
    clash = _KEY_PROPERTIES.intersection(values)
    if clash:
        raise ValueError(f"{sorted(clash)} are the adapter's key properties, not values")
    # Python ints beyond int32 must be sent as Edm.Int64 explicitly (payload lengths reach GiB).
    encoded = {
        name: EntityProperty(value, EdmType.INT64)
        if isinstance(value, int) and not isinstance(value, bool) and value not in _INT32
        else value
        for name, value in values.items()
    }
    return {"PartitionKey": key.partition, "RowKey": key.row, **encoded}


def _stored(entity: Mapping[str, Any]) -> StoredEntity:
    values = {
        name: value.value if isinstance(value, EntityProperty) else value
        for name, value in entity.items()
        if name not in _KEY_PROPERTIES
    }
    return StoredEntity(
        key=Key(entity["PartitionKey"], entity["RowKey"]),
        values=values,
        etag=str(entity.metadata["etag"]),  # type: ignore[attr-defined]
    )
