"""`claimcheck-ops deploy` and `claimcheck-ops smoke`: the last steps of the platform team's path
(docs/deploy.md). Registered on the ops CLI in scripts/ops.py; the logic is in ops_deploy/ops_smoke."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from scripts.ops_deploy import ARM_ENDPOINT, DeployTarget, RetryPolicy, deploy_package
from scripts.ops_errors import OpsError

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
    app_id: Annotated[str, typer.Option(
        "--app-id", envvar="CLAIMCHECK_FUNCTION_APP_ID",
        help="ARM resource id of the Function App: `pulumi stack output functionAppId`.")],
    package: Annotated[Path, typer.Option(help="The zip `make package` built.",
                                          dir_okay=False)] = DEFAULT_PACKAGE,
    force: Annotated[bool, typer.Option(help="Upload even when the app already runs this package.")] = False,
    timeout: Annotated[float, typer.Option(min=10,
                                           help="Seconds to wait for the deployment to finish.")] = 900,
    arm_endpoint: Annotated[str, typer.Option(help="Azure Resource Manager endpoint.")] = ARM_ENDPOINT,
    scm_url: Annotated[str | None, typer.Option(
        help="SCM endpoint override (default: https://<the app's SCM host>).")] = None,
) -> None:
    """Deploy the package to the Flex Consumption app (OneDeploy, remote build) if its sha256 changed.

    Signs in with DefaultAzureCredential (ARM token; the identity needs Website Contributor or
    Contributor on the app). The hash of the last successful deployment is the app's tag
    claimcheck-package-sha256. Waits for the deployment's result; exit code 1 with one `error:` line
    on 401/403/404, a failed build or deployment, a timeout, or retries (409/429/5xx) used up.
    """
    target = DeployTarget(app_id=app_id, arm_endpoint=arm_endpoint, scm_url=scm_url)
    try:
        result = deploy_package(package, target, azure_token, force=force, timeout_s=timeout,
                                retry=RetryPolicy(), progress=lambda line: typer.echo(line, err=True))
    except OpsError as exc:
        _fail(str(exc))
    if result.uploaded:
        typer.echo(f"deployed {package.name} (sha256 {result.sha256}) to {result.scm_host}: "
                   f"deployment {result.deployment_id} {result.status}")
    else:
        typer.echo(f"unchanged: {result.scm_host} already runs sha256 {result.sha256}; nothing uploaded")
