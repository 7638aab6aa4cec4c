"""`claimcheck-ops deploy` and `claimcheck-ops smoke`: the last steps of the platform team's path
(docs/deploy.md). Registered on the ops CLI in scripts/ops.py; the logic is in ops_deploy/ops_smoke.

Every Entra token comes from scripts.ops_token.entra_credential(): in a GitHub Actions job with
`id-token: write`, a fresh GitHub OIDC assertion per token; elsewhere DefaultAzureCredential.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from scripts.ops_deploy import ARM_ENDPOINT, DeployTarget, RetryPolicy, deploy_package, function_key
from scripts.ops_errors import OpsError
from scripts.ops_options import (
    ApiOption,
    AudienceOption,
    ClientIdOption,
    FunctionKeyOption,
    TokenIssuerOption,
)
from scripts.ops_smoke import (
    SMOKE_CLASSIFICATION,
    SMOKE_CONTENT_TYPE,
    SMOKE_PURPOSE,
    run_smoke,
)
from scripts.ops_token import LOCAL_CLIENT_ID, TokenSource, entra_token

DEFAULT_PACKAGE = Path("dist/claimcheck-functions.zip")

AppIdOption = Annotated[
    str,
    typer.Option(
        "--app-id",
        envvar="CLAIMCHECK_FUNCTION_APP_ID",
        help="ARM resource id of the Function App: `pulumi stack output functionAppId`.",
    ),
]
ArmEndpointOption = Annotated[
    str, typer.Option(envvar="CLAIMCHECK_ARM_ENDPOINT", help="Azure Resource Manager endpoint.")
]


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=1)


def azure_token(scope: str) -> str:
    """An Entra token for `scope` (scripts.ops_token.entra_token)."""
    return entra_token(scope)


def deploy(
    app_id: AppIdOption,
    package: Annotated[
        Path, typer.Option(help="The zip `make package` built.", dir_okay=False)
    ] = DEFAULT_PACKAGE,
    force: Annotated[bool, typer.Option(help="Upload even when the app already runs this package.")] = False,
    timeout: Annotated[
        float, typer.Option(min=10, help="Seconds to wait for the deployment to finish.")
    ] = 900,
    arm_endpoint: ArmEndpointOption = ARM_ENDPOINT,
    scm_url: Annotated[
        str | None,
        typer.Option(
            envvar="CLAIMCHECK_SCM_URL", help="SCM endpoint override (default: https://<the app's SCM host>)."
        ),
    ] = None,
) -> None:
    """Deploy the package to the Flex Consumption app (OneDeploy, remote build) if its sha256 changed.

    Signs in to Entra ID for an ARM token (GitHub OIDC in CI, else DefaultAzureCredential; the
    identity needs Contributor on the app, or Website Contributor plus Tag Contributor for the hash
    tag). The hash of the last successful
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


def smoke(
    api: ApiOption,
    tenant: Annotated[str, typer.Option(help="Tenant the smoke document is submitted for.")] = "smoke-test",
    function_key_value: FunctionKeyOption = None,
    app_id: Annotated[
        str | None,
        typer.Option(
            "--app-id",
            envvar="CLAIMCHECK_FUNCTION_APP_ID",
            help="On Azure without --function-key: the Function App's ARM id, whose default function "
            "key is read through ARM (listKeys) with this command's token.",
        ),
    ] = None,
    arm_endpoint: ArmEndpointOption = ARM_ENDPOINT,
    audience: AudienceOption = None,
    token_issuer: TokenIssuerOption = None,
    client_id: ClientIdOption = LOCAL_CLIENT_ID,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds for the whole test.")] = 300,
) -> None:
    """Submit one small document to the deployed API and check it end to end; exit code 0 = pass.

    Through the HTTP API only (no Service Bus connection, so a private namespace is fine): waits
    (bounded by --timeout) for the work item to complete, reads its stored result, and waits for its
    payload to be removed by the purpose's synchronous clean-up. The identity needs the API's intake
    and status rights for the tenant (claimcheck:smokeTestPrincipals) and, with --app-id, the right to
    list the app's keys (Website Contributor or Contributor on the app).
    """
    from claimcheck.client import ApiError, ClaimCheckClient

    tokens = TokenSource(audience, token_issuer, client_id)
    try:
        key = function_key_value
        if key is None and app_id:
            key = function_key(DeployTarget(app_id=app_id, arm_endpoint=arm_endpoint), azure_token)
        client = ClaimCheckClient(api, lambda: tokens.token(api), function_key=key)
    except (OpsError, ValueError) as exc:
        _fail(f"smoke test failed: {exc}")

    def submit(document: bytes) -> dict[str, Any]:
        receipt = client.submit(
            document,
            tenant_id=tenant,
            purpose=SMOKE_PURPOSE,
            classification=SMOKE_CLASSIFICATION,
            content_type=SMOKE_CONTENT_TYPE,
        )
        return dict(receipt.raw)

    def status(work_item_id: str) -> dict[str, Any]:
        code, body = client.status(work_item_id)
        if code != 200:
            raise ApiError(code, body)
        return body

    try:
        report = run_smoke(
            submit,
            status,
            lambda work_item_id, version: client.result(work_item_id, version),
            timeout_s=timeout,
            progress=lambda line: typer.echo(line, err=True),
        )
    except (OpsError, ApiError) as exc:
        _fail(f"smoke test failed: {exc}")
    typer.echo(
        f"smoke test passed: work item {report.work_item_id} completed, result of version "
        f"{report.version} stored, payload removed, {report.seconds} s"
    )
