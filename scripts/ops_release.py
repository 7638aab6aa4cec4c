"""`claimcheck-ops deploy` and `claimcheck-ops smoke`: the last steps of the platform team's path
(docs/deploy.md). Registered on the ops CLI in scripts/ops.py; the logic is in ops_deploy/ops_smoke."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from scripts.ops_api import DocumentRequest, get_work_item, send_document
from scripts.ops_deploy import ARM_ENDPOINT, DeployTarget, RetryPolicy, deploy_package
from scripts.ops_errors import OpsError
from scripts.ops_options import (
    ApiOption,
    AudienceOption,
    ClientIdOption,
    ConnectionOption,
    FunctionKeyOption,
    NamespaceOption,
    TokenIssuerOption,
)
from scripts.ops_servicebus import BusTarget, Entity, peek_pages, receiver_for
from scripts.ops_smoke import (
    SMOKE_CLASSIFICATION,
    SMOKE_CONTENT_TYPE,
    SMOKE_PURPOSE,
    FindAuditEvent,
    result_event_matches,
    run_smoke,
)
from scripts.ops_token import LOCAL_CLIENT_ID, TokenSource

DEFAULT_PACKAGE = Path("dist/claimcheck-functions.zip")


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=1)


def azure_token(scope: str) -> str:
    """An Entra token for `scope` from DefaultAzureCredential (az login, azure/login's OIDC session,
    a managed identity, or AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_FEDERATED_TOKEN_FILE)."""
    from azure.core.exceptions import ClientAuthenticationError
    from azure.identity import DefaultAzureCredential

    try:
        with DefaultAzureCredential() as credential:
            return credential.get_token(scope).token
    except ClientAuthenticationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OpsError(f"not signed in to Azure: {first} (az login, or azure/login in CI)") from None


def deploy(
    app_id: Annotated[
        str,
        typer.Option(
            "--app-id",
            envvar="CLAIMCHECK_FUNCTION_APP_ID",
            help="ARM resource id of the Function App: `pulumi stack output functionAppId`.",
        ),
    ],
    package: Annotated[
        Path, typer.Option(help="The zip `make package` built.", dir_okay=False)
    ] = DEFAULT_PACKAGE,
    force: Annotated[bool, typer.Option(help="Upload even when the app already runs this package.")] = False,
    timeout: Annotated[
        float, typer.Option(min=10, help="Seconds to wait for the deployment to finish.")
    ] = 900,
    arm_endpoint: Annotated[str, typer.Option(help="Azure Resource Manager endpoint.")] = ARM_ENDPOINT,
    scm_url: Annotated[
        str | None, typer.Option(help="SCM endpoint override (default: https://<the app's SCM host>).")
    ] = None,
) -> None:
    """Deploy the package to the Flex Consumption app (OneDeploy, remote build) if its sha256 changed.

    Signs in with DefaultAzureCredential (ARM token; the identity needs Contributor on the app, or
    Website Contributor plus Tag Contributor for the hash tag). The hash of the last successful
    deployment is the app's tag claimcheck-package-sha256. Waits for the deployment's result; exit
    code 1 with one `error:` line on 401/403/404, a failed build or deployment, a timeout, or
    retries (409/429/5xx) used up.
    """
    target = DeployTarget(app_id=app_id, arm_endpoint=arm_endpoint, scm_url=scm_url)
    try:
        result = deploy_package(
            package,
            target,
            azure_token,
            force=force,
            timeout_s=timeout,
            retry=RetryPolicy(),
            progress=lambda line: typer.echo(line, err=True),
        )
    except OpsError as exc:
        _fail(str(exc))
    if result.uploaded:
        typer.echo(
            f"deployed {package.name} (sha256 {result.sha256}) to {result.scm_host}: "
            f"deployment {result.deployment_id} {result.status}"
        )
    else:
        typer.echo(f"unchanged: {result.scm_host} already runs sha256 {result.sha256}; nothing uploaded")


def _audit_finder(target: BusTarget, topic: str, subscription: str, limit: int) -> FindAuditEvent:
    """Peeks `topic/subscription` (no lock, nothing removed) for the result event of a work item."""

    def find(work_item_id: str) -> int | None:
        with (
            target.client() as client,
            receiver_for(client, Entity(topic, subscription), dead_letter=False) as receiver,
        ):
            for message in peek_pages(receiver, limit):
                if result_event_matches(b"".join(message.body), work_item_id):
                    return int(message.sequence_number or 0)
        return None

    return find


def smoke(
    api: ApiOption,
    tenant: Annotated[str, typer.Option(help="Tenant the smoke document is submitted for.")] = "smoke-test",
    connection_string: ConnectionOption = None,
    namespace: NamespaceOption = None,
    results_topic: Annotated[str, typer.Option(help="The results topic.")] = "results",
    audit_subscription: Annotated[
        str, typer.Option(help="The subscription that receives every result.")
    ] = "audit",
    function_key: FunctionKeyOption = None,
    audience: AudienceOption = None,
    token_issuer: TokenIssuerOption = None,
    client_id: ClientIdOption = LOCAL_CLIENT_ID,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds for the whole test.")] = 300,
    peek_limit: Annotated[
        int, typer.Option(min=1, help="At most this many audit messages peeked per look.")
    ] = 5000,
) -> None:
    """Submit one small document to the deployed API and check it end to end; exit code 0 = pass.

    Waits (bounded by --timeout) for the work item to complete, for its result event in the audit
    subscription (peeked: nothing is removed), and for its payload to be removed by the purpose's
    synchronous clean-up. The identity needs the API's intake and status rights and, on Azure,
    Azure Service Bus Data Receiver on the audit subscription (to peek).
    """
    from azure.core.exceptions import AzureError

    tokens = TokenSource(audience, token_issuer, client_id)
    bus = (
        BusTarget(connection_string=connection_string or None, namespace=namespace or None)
        if (connection_string or namespace)
        else None
    )
    if bus is None:
        _fail("give --connection-string (local) or --namespace (Azure) to check the audit subscription")

    def submit(document: bytes) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="claimcheck-smoke-") as folder:
            path = Path(folder) / "smoke-contract.txt"
            path.write_bytes(document)
            request = DocumentRequest(path, tenant, SMOKE_PURPOSE, SMOKE_CLASSIFICATION, SMOKE_CONTENT_TYPE)
            return send_document(api, request, tokens, function_key)

    def status(work_item_id: str) -> dict[str, Any]:
        return get_work_item(api, work_item_id, tokens, None, function_key)

    try:
        report = run_smoke(
            submit,
            status,
            _audit_finder(bus, results_topic, audit_subscription, peek_limit),
            timeout_s=timeout,
            progress=lambda line: typer.echo(line, err=True),
        )
    except OpsError as exc:
        _fail(f"smoke test failed: {exc}")
    except AzureError as exc:  # Service Bus unreachable or not authorized: a failed test, in one line
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        _fail(f"smoke test failed reading {results_topic}/{audit_subscription}: {type(exc).__name__}: {text}")
    typer.echo(
        f"smoke test passed: work item {report.work_item_id} completed, result event in "
        f"{results_topic}/{audit_subscription} (sequence {report.audit_sequence_number}), payload "
        f"removed, {report.seconds} s"
    )
