"""The composition root: one ``ClaimCheck`` wires the ports to the Azure adapters.

SDK imports happen inside ``from_settings``, so importing ``claimcheck`` stays cheap for the
Function App's cold start.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from claimcheck.analysis import Analyzer, ContractObligationExtractor
from claimcheck.cleanup import Cleaner
from claimcheck.consumer import Consumer
from claimcheck.deadletters import DeadLetterSource
from claimcheck.deliveries import DeliveryCounter
from claimcheck.idempotency import IdempotencyLedger
from claimcheck.intake_keys import INTAKE_LEASE, IntakeKeys
from claimcheck.integrity import DEFAULT_CHUNK_BYTES
from claimcheck.messages import Bus
from claimcheck.policy import DEFAULT_PURPOSES, PurposePolicy
from claimcheck.producer import Producer
from claimcheck.propagation import PropagationEntries
from claimcheck.reconciler import Reconciler
from claimcheck.registry import PayloadRegistry
from claimcheck.settings import DEFAULT_CONSUMER_IDENTITY, PURPOSE_CONSUMERS_SETTING, Settings, SettingsError
from claimcheck.uploads import DirectUploads
from claimcheck.workitems import WorkItemStatus, WorkItemStore

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

SERVICE_IDENTITY = DEFAULT_CONSUMER_IDENTITY

# The status API reads on its own short leash: when the authoritative table is unreachable an agent
# gets a 503 with Retry-After in seconds (and asks again), never a stale answer and never a request
# that hangs through the SDK's default retries for minutes.
STATUS_READ_LIMITS: dict[str, Any] = {"retry_total": 1, "connection_timeout": 3, "read_timeout": 10}


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ClaimCheck:
    producer: Producer
    consumer: Consumer
    reconciler: Reconciler
    status: WorkItemStatus
    intake_keys: IntakeKeys
    # Large documents: write-only grant to a staging blob, then a verified commit (claimcheck.uploads).
    uploads: DirectUploads | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        storage_connection: str | None = None,
        blob_service_uri: str | None = None,
        table_service_uri: str | None = None,
        bus: Bus,
        credential: TokenCredential | None = None,
        analyzer: Analyzer | None = None,
        purposes: Mapping[str, PurposePolicy] = DEFAULT_PURPOSES,
        identity: str | None = None,
        clock: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], None] = time.sleep,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        dead_letters: DeadLetterSource | None = None,
        request_hook: Callable[[str, Any], None] | None = None,
    ) -> ClaimCheck:
        """Build from a connection string (local: Azurite, creates what is missing) or from service
        URIs with a token credential (Azure: infra/ provisions the container and tables).

        ``request_hook(service, request)``: called with ``"blob"`` or ``"table"`` and azure-core's
        ``PipelineRequest`` for every storage request actually sent (once per attempt);
        local/storage_requests.py counts the hot path's round trips with it.

        ``identity`` defaults to the settings' consumer identity; the settings' allowed consumers per
        purpose replace the purpose table's readers.
        """
        identity = identity or settings.consumer_identity
        purposes = with_consumers(purposes, settings.purpose_consumers)
        from azure.data.tables import TableServiceClient
        from azure.storage.blob import BlobServiceClient

        from claimcheck.adapters.blobs import AzureBlobPayloadStore
        from claimcheck.adapters.staging import AzureBlobStagingArea
        from claimcheck.adapters.tables import AzureEntityTable

        # Bounded transfers: the SDK never buffers more than one chunk per request.
        transfer: dict[str, Any] = {
            "max_single_get_size": chunk_bytes,
            "max_chunk_get_size": chunk_bytes,
            "max_block_size": chunk_bytes,
            "max_single_put_size": chunk_bytes,
        }
        table_options: dict[str, Any] = {}
        if request_hook is not None:
            transfer["raw_request_hook"] = functools.partial(request_hook, "blob")
            table_options["raw_request_hook"] = functools.partial(request_hook, "table")
        if storage_connection is not None:
            blobs = BlobServiceClient.from_connection_string(storage_connection, **transfer)
            tables = TableServiceClient.from_connection_string(storage_connection, **table_options)
            status_tables = TableServiceClient.from_connection_string(
                storage_connection, **STATUS_READ_LIMITS
            )
        else:
            if blob_service_uri is None or table_service_uri is None:
                raise ValueError("give storage_connection, or both blob_service_uri and table_service_uri")
            if credential is None:
                from azure.identity import DefaultAzureCredential

                credential = DefaultAzureCredential()
            blobs = BlobServiceClient(blob_service_uri, credential=credential, **transfer)
            tables = TableServiceClient(table_service_uri, credential=credential, **table_options)
            status_tables = TableServiceClient(table_service_uri, credential=credential, **STATUS_READ_LIMITS)
        container = blobs.get_container_client(settings.payload_container)
        table_names = (
            settings.registry_table,
            settings.idempotency_table,
            settings.work_items_table,
            settings.audit_table,
            settings.results_table,
        )
        if storage_connection is not None:
            if not container.exists():
                container.create_container()
            for name in table_names:
                tables.create_table_if_not_exists(name)

        def table(name: str) -> AzureEntityTable:
            return AzureEntityTable(tables.get_table_client(name))

        store = AzureBlobPayloadStore(
            container, chunk_bytes=chunk_bytes, provisional_tag=settings.provisional_tag
        )
        registry = PayloadRegistry(table(settings.registry_table))
        work_items = WorkItemStore(table(settings.work_items_table))
        cleaner = Cleaner(store, registry, table(settings.audit_table), identity=identity)
        ledger = IdempotencyLedger(
            table(settings.idempotency_table),
            lease=timedelta(seconds=settings.claim_lease_seconds),
        )
        return cls(
            producer=Producer(
                settings=settings,
                store=store,
                registry=registry,
                work_items=work_items,
                bus=bus,
                purposes=purposes,
                identity=identity,
                clock=clock,
            ),
            consumer=Consumer(
                settings=settings,
                store=store,
                registry=registry,
                work_items=work_items,
                ledger=ledger,
                deliveries=DeliveryCounter(table(settings.idempotency_table)),
                results=table(settings.results_table),
                cleaner=cleaner,
                bus=bus,
                analyzer=analyzer or ContractObligationExtractor(),
                purposes=purposes,
                identity=identity,
                clock=clock,
                sleep=sleep,
            ),
            reconciler=Reconciler(
                settings=settings,
                store=store,
                registry=registry,
                work_items=work_items,
                cleaner=cleaner,
                purposes=purposes,
                clock=clock,
                dead_letters=dead_letters,
                propagation=PropagationEntries(table(settings.work_items_table)),
            ),
            status=WorkItemStatus(
                WorkItemStore(AzureEntityTable(status_tables.get_table_client(settings.work_items_table))),
                PayloadRegistry(AzureEntityTable(status_tables.get_table_client(settings.registry_table))),
                window=timedelta(seconds=settings.visibility_window_seconds),
                clock=clock,
                entries=PropagationEntries(
                    AzureEntityTable(status_tables.get_table_client(settings.work_items_table))
                ),
            ),
            intake_keys=IntakeKeys(
                table(settings.idempotency_table),
                window=timedelta(seconds=settings.idempotency_window_seconds),
                lease=INTAKE_LEASE,
                clock=clock,
            ),
            uploads=DirectUploads(
                AzureBlobStagingArea(blobs, container),
                purposes=purposes,
                max_bytes=settings.max_payload_bytes,
                orphan_grace=timedelta(seconds=settings.orphan_grace_seconds),
                clock=clock,
            ),
        )


def with_consumers(
    purposes: Mapping[str, PurposePolicy], consumers: Mapping[str, frozenset[str]]
) -> Mapping[str, PurposePolicy]:
    """The purpose table with each listed purpose's readers replaced; an unknown purpose is refused."""
    unknown = sorted(set(consumers) - set(purposes))
    if unknown:
        raise SettingsError(f"{PURPOSE_CONSUMERS_SETTING} names unknown purposes {unknown}")
    return {
        name: replace(policy, readers=consumers.get(name, policy.readers))
        for name, policy in purposes.items()
    }
