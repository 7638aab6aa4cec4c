"""Azure Tables adapter of the ``EntityTable`` port (azure-data-tables)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import EdmType, EntityProperty, UpdateMode

from claimcheck.errors import ConcurrencyConflict, RecordExists, RecordNotFound
from claimcheck.storage import StoredEntity

if TYPE_CHECKING:
    from azure.data.tables import TableClient

_INT32 = range(-(2**31), 2**31)


class AzureEntityTable:
    """One Azure table. Foreign errors become the core's ``StoreError`` leaves, chained ``from``."""

    def __init__(self, client: TableClient) -> None:
        self._client = client

    def get(self, partition_key: str, row_key: str) -> StoredEntity | None:
        try:
            entity = self._client.get_entity(partition_key, row_key)
        except ResourceNotFoundError:
            return None
        return _stored(entity)

    def insert(self, entity: Mapping[str, Any]) -> str:
        try:
            metadata = self._client.create_entity(_encode(entity))
        except ResourceExistsError as exc:
            raise RecordExists(f"{self._client.table_name}: key already taken") from exc
        return str(metadata["etag"])

    def replace(self, entity: Mapping[str, Any], etag: str) -> str:
        try:
            metadata = self._client.update_entity(
                _encode(entity),
                mode=UpdateMode.REPLACE,
                etag=etag,
                match_condition=MatchConditions.IfNotModified,
            )
        except ResourceModifiedError as exc:
            raise ConcurrencyConflict(f"{self._client.table_name}: record changed since it was read") from exc
        except ResourceNotFoundError as exc:
            raise RecordNotFound(f"{self._client.table_name}: record is gone") from exc
        return str(metadata["etag"])

    def delete(self, partition_key: str, row_key: str, etag: str) -> None:
        try:
            self._client.delete_entity(
                partition_key, row_key, etag=etag, match_condition=MatchConditions.IfNotModified
            )
        except ResourceModifiedError as exc:
            raise ConcurrencyConflict(f"{self._client.table_name}: record changed since it was read") from exc

    def query(self, filter_expression: str, parameters: Mapping[str, Any]) -> Iterator[StoredEntity]:
        for entity in self._client.query_entities(filter_expression, parameters=dict(parameters)):
            yield _stored(entity)


def _encode(entity: Mapping[str, Any]) -> dict[str, Any]:
    # Python ints beyond int32 must be sent as Edm.Int64 explicitly (payload lengths reach GiB).
    return {
        key: EntityProperty(value, EdmType.INT64)
        if isinstance(value, int) and not isinstance(value, bool) and value not in _INT32
        else value
        for key, value in entity.items()
    }


def _stored(entity: Mapping[str, Any]) -> StoredEntity:
    values = {
        key: value.value if isinstance(value, EntityProperty) else value for key, value in entity.items()
    }
    return StoredEntity(values=values, etag=str(entity.metadata["etag"]))  # type: ignore[attr-defined]
