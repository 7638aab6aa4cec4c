"""`claimcheck-ops reconcile` and `claimcheck-ops revoke`: the reconciler run on demand, and reads of a
work item's payload revoked, directly against payload storage (and the bus for dead-letter counts).

Who may: whoever the storage service lets write the registry. The identity recorded with a revocation
is the one the credential proves — on Azure the token Entra ID issued to DefaultAzureCredential for
Storage (its object id), locally the holder of Azurite's account key — never a name the caller types.
The settings (table and container names, graces, alert age) come from the same environment variables
the Function App reads (claimcheck/settings.py).
"""

from __future__ import annotations

import base64
import json
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from scripts.ops_errors import OpsError
from scripts.ops_options import ConnectionOption, ManagementOption, NamespaceOption, StackOutputsOption
from scripts.ops_output import print_json

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential
    from claimcheck import ClaimCheck
    from claimcheck.deadletters import DeadLetterSource

StorageOption = Annotated[
    str | None,
    typer.Option(
        "--storage-connection-string",
        envvar="CLAIMCHECK_STORAGE_CONNECTION",
        show_default=False,
        help="Payload storage connection string (local Azurite). Never printed.",
    ),
]
BlobUriOption = Annotated[
    str | None,
    typer.Option(
        "--blob-service-uri", envvar="CLAIMCHECK_BLOB_SERVICE_URI", help="Azure: payload blob endpoint."
    ),
]
TableUriOption = Annotated[
    str | None,
    typer.Option("--table-service-uri", envvar="CLAIMCHECK_TABLE_SERVICE_URI", help="Azure: table endpoint."),
]
LOCAL_KEY_HOLDER = "storage account key holder (connection string)"


class _NoPublishing:
    """Reconciliation and revocation publish nothing; a publish here would be a bug."""

    def publish(self, destination: str, message: object) -> None:
        raise OpsError("reconciliation does not publish messages")


def _storage(
    connection: str | None, blob_uri: str | None, table_uri: str | None
) -> tuple[dict[str, Any], str]:
    """ClaimCheck storage arguments and the identity the credential proves."""
    if connection:
        return {"storage_connection": connection}, LOCAL_KEY_HOLDER
    if not (blob_uri and table_uri):
        raise OpsError(
            "give --storage-connection-string (local) or both --blob-service-uri and"
            " --table-service-uri (Azure), or start the local stack (python -m local.stack),"
            " which claimcheck-ops finds by itself"
        )
    from azure.identity import DefaultAzureCredential

    credential = DefaultAzureCredential()
    arguments = {"blob_service_uri": blob_uri, "table_service_uri": table_uri, "credential": credential}
    return arguments, proven_identity(credential)


def proven_identity(credential: TokenCredential) -> str:
    """The object id (else app id / upn) in the Storage token Entra ID issued to ``credential``. Read
    from our own freshly issued token, not validated again: Storage validates it on every request."""
    token = credential.get_token("https://storage.azure.com/.default").token
    try:
        claims_segment = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(claims_segment + "=" * (-len(claims_segment) % 4)))
    except (IndexError, ValueError):
        raise OpsError("the storage token is not a JWT: cannot tell who is acting") from None
    for name in ("oid", "appid", "upn"):
        if isinstance(claims.get(name), str):
            return f"{name}:{claims[name]}"
    raise OpsError("the storage token names no oid, appid or upn: cannot tell who is acting")


def _claimcheck(storage: dict[str, Any], dead_letters: DeadLetterSource | None = None) -> ClaimCheck:
    from claimcheck import ClaimCheck
    from claimcheck.settings import Settings, SettingsError

    try:
        settings = Settings.from_env(os.environ)
    except SettingsError as exc:
        raise OpsError(str(exc)) from None
    return ClaimCheck.from_settings(settings, bus=_NoPublishing(), dead_letters=dead_letters, **storage)


def _run(claimcheck: ClaimCheck) -> dict[str, Any]:
    """The reconciler's report, plus the direct-upload staging blobs never committed that the sweep
    removed (what the reconcile timer does after the reconciler)."""
    report = claimcheck.reconciler.run().to_dict()
    if claimcheck.uploads is not None:
        report["uncommitted_uploads_removed"] = claimcheck.uploads.sweep()
    return report


def reconcile(
    storage_connection_string: StorageOption = None,
    blob_service_uri: BlobUriOption = None,
    table_service_uri: TableUriOption = None,
    connection_string: ConnectionOption = None,
    namespace: NamespaceOption = None,
    management_connection_string: ManagementOption = None,
    stack_outputs: StackOutputsOption = None,
) -> None:
    """Run the reconciler once now (what the timer does every five minutes) and print its report:
    orphans, finished activations and cleanups, missing objects, errors and alerts (references and
    work item ids only, never payload bytes). With a Service Bus (--connection-string or --namespace)
    the report also holds the dead-letter count and oldest age of every queue and subscription the
    stack names (--stack-outputs, as `stats`; each read by name, so an operator's entity-scoped roles
    suffice), with an alert past CLAIMCHECK_DEAD_LETTER_ALERT_AGE_SECONDS. Without any storage or
    Service Bus option, the running local stack's are used."""
    from scripts.ops_local import bus_defaults, storage_default

    local_storage = storage_default(storage_connection_string, blob_service_uri, table_service_uri)
    storage, _ = _storage(local_storage, blob_service_uri, table_service_uri)
    connection_string, namespace, management_connection_string = bus_defaults(
        connection_string, namespace, management_connection_string
    )
    if not (connection_string or namespace):
        print_json(_run(_claimcheck(storage)))
        return
    from claimcheck.adapters.busadmin import ServiceBusDeadLetters

    from scripts.ops_servicebus import BusTarget
    from scripts.ops_stats import StackEntities, administration_client_for

    target = BusTarget(connection_string=connection_string or None, namespace=namespace or None)
    entities = StackEntities.from_file(stack_outputs) if stack_outputs else StackEntities.default()
    with administration_client_for(target, management_connection_string) as admin, target.client() as client:
        subscriptions = [(entity.name, str(entity.subscription)) for entity in entities.subscriptions]
        source = ServiceBusDeadLetters(
            admin, client, queues=list(entities.queues), subscriptions=subscriptions
        )
        report = _run(_claimcheck(storage, source))
    print_json(report)


def revoke(
    work_item_id: Annotated[str, typer.Argument(help="The work item whose latest version to revoke.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (e.g. an incident id); logged.")],
    storage_connection_string: StorageOption = None,
    blob_service_uri: BlobUriOption = None,
    table_service_uri: TableUriOption = None,
) -> None:
    """Block every further read of a work item's latest stored object (deliveries dead-letter
    access_denied); the object and its metadata are kept for the investigation. The identity recorded
    is the one your storage credential proves."""
    if not reason.strip():
        raise OpsError("--reason must say why")
    from scripts.ops_local import storage_default

    local_storage = storage_default(storage_connection_string, blob_service_uri, table_service_uri)
    storage, identity = _storage(local_storage, blob_service_uri, table_service_uri)
    claimcheck = _claimcheck(storage)
    version = claimcheck.reconciler.revoke_work_item(work_item_id, why=reason, by=identity)
    if version is None:
        why_not = _why_not(claimcheck, work_item_id)
        raise OpsError(f"nothing to revoke for work item {work_item_id}: {why_not}")
    print_json({"work_item_id": work_item_id, "version": version, "revoked": True, "revoked_by": identity})


# Why a work item's latest object cannot be revoked, by its payload state (claimcheck/states.py: only a
# stored object not yet consumed, ref_published or available, may move to access_denied).
_NOT_REVOCABLE = {
    "inline": "its document travelled inline in the message: no stored object to revoke",
    "processed": "its object was processed (kept by its purpose's policy, e.g. evidence-archive): "
    "the payload state machine moves a processed object only to cleanup or removal",
    "removed": "its object was already removed after processing",
    "cleanup_pending": "its object is being removed after processing",
    "access_denied": "its reads are already revoked",
    "integrity_failed": "its object failed verification: no delivery reads it again",
    "missing": "its object is missing",
}


def _why_not(claimcheck: ClaimCheck, work_item_id: str) -> str:
    view = claimcheck.status.get(work_item_id)
    if view is None:
        return "no such work item"
    state = view.payload_state or "unknown"
    return _NOT_REVOCABLE.get(state, f"its object is {state}")
