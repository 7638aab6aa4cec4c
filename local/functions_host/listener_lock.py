"""The singleton listener lock of a timer trigger: a blob lease in ``AzureWebJobsStorage``.

The real host runs a timer's listener in one instance of a scaled-out app: the instance that holds a
lease on the blob ``azure-webjobs-hosts/locks/<host id>/<function id>.Listener`` (the WebJobs SDK's
singleton lock; the lock id comes from the function's full name), renewing it while it runs and
giving it up when it stops; the other instances try again now and then, so a dead holder's timer
moves to another instance once its lease expires. Here the same, against Azurite, with shorter
periods than Azure's (a 15 s lease, the shortest Blob Storage grants, renewed every 5 s and tried
for every 5 s), so that a killed instance's timer moves within about 20 s.

Each instance leases with an id of its own, stable across restarts (derived from the host id and the
instance index): a restarted instance takes back the lease its killed predecessor left at once, as a
second holder with the same id is the same holder (which Azure's host gets from its instance id).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import uuid
from pathlib import Path

from azure.core.exceptions import AzureError, HttpResponseError, ResourceExistsError
from azure.storage.blob import BlobLeaseClient, ContainerClient

logger = logging.getLogger(__name__)

LOCKS_CONTAINER = "azure-webjobs-hosts"
LEASE_SECONDS = 15
RENEW_EVERY_SECONDS = 5.0
RETRY_EVERY_SECONDS = 5.0
# Each lease call is one short request: Azurite answers at once or is down.
_REQUEST_TIMEOUT_SECONDS = 5


def host_id(app_path: Path) -> str:
    """The app's host id (Azure: from the app's name; here from its folder), at most 32 characters."""
    digest = hashlib.sha256(str(app_path.resolve().parent).encode()).hexdigest()
    return f"local-{digest[:26]}"


class ListenerLock:
    """``try_acquire()`` / ``renew()`` / ``release()`` of one function's listener lease for one instance."""

    def __init__(self, connection_string: str, host: str, function_name: str, instance: int) -> None:
        self.blob_name = f"locks/{host}/Host.Functions.{function_name}.Listener"
        self._container = ContainerClient.from_connection_string(
            connection_string,
            LOCKS_CONTAINER,
            retry_total=0,
            connection_timeout=_REQUEST_TIMEOUT_SECONDS,
            read_timeout=_REQUEST_TIMEOUT_SECONDS,
        )
        self._blob = self._container.get_blob_client(self.blob_name)
        lease_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{host}/{function_name}/instance-{instance}"))
        self._lease = BlobLeaseClient(self._blob, lease_id=lease_id)
        self._blob_exists = False

    def try_acquire(self) -> bool:
        """Take the lease if nobody else holds it (or this instance already does); False otherwise,
        storage being unreachable included (the next try decides)."""
        try:
            self._ensure_blob()
            self._lease.acquire(lease_duration=LEASE_SECONDS)
        except HttpResponseError as error:
            if error.status_code != 409:  # 409: another instance holds it
                logger.warning(
                    "listener lock %s: acquire failed (HTTP %s)", self.blob_name, error.status_code
                )
            return False
        except AzureError as error:
            logger.warning("listener lock %s: storage unreachable (%s)", self.blob_name, type(error).__name__)
            return False
        return True

    def renew(self) -> bool:
        """Keep the lease; False if it was lost or storage did not answer (the holder must stop firing)."""
        try:
            self._lease.renew()
        except AzureError as error:
            logger.warning("listener lock %s: renewal failed (%s)", self.blob_name, type(error).__name__)
            return False
        return True

    def release(self) -> None:
        with contextlib.suppress(AzureError):  # else it ends by itself within LEASE_SECONDS
            self._lease.release()

    def close(self) -> None:
        self._container.close()

    def _ensure_blob(self) -> None:
        if self._blob_exists:
            return
        with contextlib.suppress(ResourceExistsError):
            self._container.create_container()
        with contextlib.suppress(ResourceExistsError):  # made by another instance, maybe leased already
            self._blob.upload_blob(b"", overwrite=False)
        self._blob_exists = True
