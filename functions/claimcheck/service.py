"""The composition root: ``ClaimCheck.build`` wires the core to its ports, and nothing else.

``from_settings`` is ``build`` on the Azure adapters (``claimcheck.adapters.azure`` constructs the
SDK clients); it imports them when called, so importing ``claimcheck`` stays cheap for the Function
App's cold start. Tests build on ``claimcheck.testing``'s fakes instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

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
from claimcheck.result_reads import ResultReader
from claimcheck.routing import PayloadStores
from claimcheck.settings import DEFAULT_CONSUMER_IDENTITY, PURPOSE_CONSUMERS_SETTING, Settings, SettingsError
from claimcheck.settlement_repair import SettlementRepair
from claimcheck.storage import PayloadStore, Tables
from claimcheck.uploads import DirectUploads, StagingArea
from claimcheck.workitems import WorkItemStatus, WorkItemStore

SERVICE_IDENTITY = DEFAULT_CONSUMER_IDENTITY


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
    # Full analysis results for GET /work-items/{id}/result (None where a test wires no results table).
    results: ResultReader | None = None

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        store: PayloadStore | PayloadStores,
        tables: Tables,
        bus: Bus,
        clock: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], None] = time.sleep,
        analyzer: Analyzer | None = None,
        purposes: Mapping[str, PurposePolicy] = DEFAULT_PURPOSES,
        identity: str | None = None,
        dead_letters: DeadLetterSource | None = None,
        status_tables: Tables | None = None,
        staging: StagingArea | None = None,
    ) -> ClaimCheck:
        """Wire the core to its ports; nothing here touches the network.

        ``store``: one store per container routed by purpose (claimcheck.routing), or a single store
        holding every purpose's payloads (e.g. one fake).

        ``staging``: where direct uploads of large documents land (``uploads`` is None without it).

        ``status_tables``: where the status API reads (default ``tables``; on Azure, clients with a
        short leash). ``identity`` defaults to the settings' consumer identity; the settings' allowed
        consumers per purpose replace the purpose table's readers.
        """
        identity = identity or settings.consumer_identity
        purposes = with_consumers(purposes, settings.purpose_consumers)
        status_tables = status_tables or tables
        if isinstance(store, PayloadStores):
            stores = store
            stores.routes.check(purposes)
        else:
            stores = PayloadStores.single(store, settings.payload_container)
        registry = PayloadRegistry(tables.registry)
        work_items = WorkItemStore(tables.work_items)
        cleaner = Cleaner(stores, registry, tables.audit, identity=identity)
        ledger = IdempotencyLedger(tables.idempotency, lease=timedelta(seconds=settings.claim_lease_seconds))
        return cls(
            producer=Producer(
                settings=settings,
                stores=stores,
                registry=registry,
                work_items=work_items,
                bus=bus,
                purposes=purposes,
                identity=identity,
                clock=clock,
            ),
            consumer=Consumer(
                settings=settings,
                stores=stores,
                registry=registry,
                work_items=work_items,
                ledger=ledger,
                deliveries=DeliveryCounter(tables.idempotency),
                results=tables.results,
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
                stores=stores,
                registry=registry,
                work_items=work_items,
                cleaner=cleaner,
                settlement_repair=SettlementRepair(
                    ledger=ledger, work_items=work_items, results=tables.results
                ),
                purposes=purposes,
                clock=clock,
                dead_letters=dead_letters,
                propagation=PropagationEntries(tables.work_items),
            ),
            status=WorkItemStatus(
                WorkItemStore(status_tables.work_items),
                PayloadRegistry(status_tables.registry),
                window=timedelta(seconds=settings.visibility_window_seconds),
                clock=clock,
                entries=PropagationEntries(status_tables.work_items),
            ),
            intake_keys=IntakeKeys(
                tables.idempotency,
                window=timedelta(seconds=settings.idempotency_window_seconds),
                lease=INTAKE_LEASE,
                clock=clock,
            ),
            uploads=None
            if staging is None
            else DirectUploads(
                staging,
                purposes=purposes,
                max_bytes=settings.max_payload_bytes,
                orphan_grace=timedelta(seconds=settings.orphan_grace_seconds),
                clock=clock,
            ),
            results=ResultReader(status_tables.results),
        )

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        storage_connection: str | None = None,
        blob_service_uri: str | None = None,
        table_service_uri: str | None = None,
        bus: Bus,
        credential: object | None = None,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        request_hook: Callable[[str, Any], None] | None = None,
        clock: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], None] = time.sleep,
        analyzer: Analyzer | None = None,
        purposes: Mapping[str, PurposePolicy] = DEFAULT_PURPOSES,
        identity: str | None = None,
        dead_letters: DeadLetterSource | None = None,
    ) -> ClaimCheck:
        """``build`` on Azure Blob and Table Storage (``claimcheck.adapters.azure.connect_storage``):
        a connection string (Azurite) or service URIs with a token credential (Azure; an azure-core
        ``TokenCredential``, typed ``object`` here so that the core names no SDK type).

        The container and the tables must exist: ``infra/`` declares them on Azure, the local stack
        and the test harnesses call ``claimcheck.adapters.azure.provision_storage``.
        """
        from claimcheck.adapters.azure import connect_storage

        storage = connect_storage(
            settings,
            storage_connection=storage_connection,
            blob_service_uri=blob_service_uri,
            table_service_uri=table_service_uri,
            credential=credential,
            chunk_bytes=chunk_bytes,
            request_hook=request_hook,
        )
        return cls.build(
            settings,
            store=storage.store,
            tables=storage.tables,
            status_tables=storage.status_tables,
            staging=storage.staging,
            bus=bus,
            clock=clock,
            sleep=sleep,
            analyzer=analyzer,
            purposes=purposes,
            identity=identity,
            dead_letters=dead_letters,
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
