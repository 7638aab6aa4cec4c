"""The adapter edge for Azure SDK errors: what an adapter did not translate into a core meaning
(``RecordExists``, ``ObjectNotFound``...) leaves as ``StorageUnavailable`` or ``StorageFailed``
(storage), ``BrokerUnavailable`` or ``BrokerFailed`` (Service Bus, data and management plane), chained
``from`` the SDK's exception (``resilience.is_outage`` still sees it through the chain).

Messages name the operation, the SDK's exception type and the HTTP status, never the SDK's text
(it can quote URLs and request details).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from azure.core.exceptions import AzureError, ServiceRequestError, ServiceResponseError

from claimcheck.errors import BrokerFailed, BrokerUnavailable, StorageFailed, StorageUnavailable


@contextmanager
def storage_errors(operation: str) -> Iterator[None]:
    try:
        yield
    except (ServiceRequestError, ServiceResponseError) as exc:
        raise StorageUnavailable(f"{operation}: storage did not answer ({type(exc).__name__})") from exc
    except AzureError as exc:
        raise StorageFailed(f"{operation}: storage refused ({_answered(exc)})") from exc


@contextmanager
def bus_errors(operation: str) -> Iterator[None]:
    """The Service Bus SDKs' errors (AMQP data plane and the HTTP management plane) as broker errors."""
    from azure.servicebus.exceptions import (  # lazy, as the adapters import azure-servicebus
        OperationTimeoutError,
        ServiceBusCommunicationError,
        ServiceBusConnectionError,
    )

    try:
        yield
    except (
        ServiceBusConnectionError,
        ServiceBusCommunicationError,
        OperationTimeoutError,
        ServiceRequestError,
        ServiceResponseError,
    ) as exc:
        raise BrokerUnavailable(f"{operation}: Service Bus did not answer ({type(exc).__name__})") from exc
    except AzureError as exc:  # ServiceBusError derives from it
        raise BrokerFailed(f"{operation}: Service Bus refused ({_answered(exc)})") from exc


def _answered(exc: AzureError) -> str:
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}, HTTP {status}" if status else type(exc).__name__
