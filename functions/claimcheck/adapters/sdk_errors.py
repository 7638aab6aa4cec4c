"""The adapter edge for Azure SDK errors: what an adapter did not translate into a core meaning
(``RecordExists``, ``ObjectNotFound``...) leaves as ``StorageUnavailable`` or ``StorageFailed``,
chained ``from`` the SDK's exception (``resilience.is_outage`` still sees it through the chain).

Messages name the operation, the SDK's exception type and the HTTP status, never the SDK's text
(it can quote URLs and request details).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from azure.core.exceptions import AzureError, ServiceRequestError, ServiceResponseError

from claimcheck.errors import StorageFailed, StorageUnavailable


@contextmanager
def storage_errors(operation: str) -> Iterator[None]:
    try:
        yield
    except (ServiceRequestError, ServiceResponseError) as exc:
        raise StorageUnavailable(f"{operation}: storage did not answer ({type(exc).__name__})") from exc
    except AzureError as exc:
        status = getattr(exc, "status_code", None)
        answered = f"{type(exc).__name__}, HTTP {status}" if status else type(exc).__name__
        raise StorageFailed(f"{operation}: storage refused ({answered})") from exc
