"""The command-line options that several `claimcheck-ops` commands share, declared once: each flag, its
environment variable and its help text have one spelling (ops.py, ops_release.py, ops_reconcile.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConnectionOption = Annotated[
    str | None,
    typer.Option(
        "--connection-string",
        envvar="CLAIMCHECK_SERVICEBUS_CONNECTION",
        show_default=False,
        help="Service Bus connection string (the local emulator's). Never printed.",
    ),
]
NamespaceOption = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        envvar="CLAIMCHECK_SERVICEBUS_NAMESPACE",
        help="Namespace FQDN (pulumi stack output serviceBusFqdn); signs in with DefaultAzureCredential.",
    ),
]
ManagementOption = Annotated[
    str | None,
    typer.Option(
        "--management-connection-string",
        envvar="CLAIMCHECK_SERVICEBUS_MANAGEMENT_CONNECTION",
        help="Emulator only: its management connection string (the '(management)' line it prints); "
        "default: the --connection-string on port 5300 when that one is on 5672.",
    ),
]
ApiOption = Annotated[
    str,
    typer.Option(
        "--api", envvar="CLAIMCHECK_API", help="Base URL of the Function App API (https://<host>/api)."
    ),
]
LocalApiOption = Annotated[
    str | None,
    typer.Option(
        "--api",
        envvar="CLAIMCHECK_API",
        show_default=False,
        help="Base URL of the Function App API (https://<host>/api); default: the running local "
        "stack's, else http://localhost:7071/api.",
    ),
]
FunctionKeyOption = Annotated[
    str | None,
    typer.Option(
        "--function-key",
        envvar="CLAIMCHECK_API_KEY",
        show_default=False,
        help="Function or host key for the API on Azure (sent as x-functions-key). Never printed.",
    ),
]
AudienceOption = Annotated[
    str | None,
    typer.Option(
        "--audience",
        envvar="CLAIMCHECK_API_AUDIENCE",
        show_default=False,
        help="The API's application ID URI (pulumi stack output apiAudience); on Azure the token comes "
        "from DefaultAzureCredential for <audience>/.default. Tokens are never printed.",
    ),
]
TokenIssuerOption = Annotated[
    str | None,
    typer.Option(
        "--token-issuer",
        envvar="CLAIMCHECK_TOKEN_ISSUER",
        show_default=False,
        help="The local stack's token issuer (printed by python -m local.stack); the default for a "
        "loopback --api is the issuer on port 7090.",
    ),
]
ClientIdOption = Annotated[
    str,
    typer.Option("--client-id", envvar="CLAIMCHECK_CLIENT_ID", help="Local identity to get a token for."),
]
TelemetryDirOption = Annotated[
    Path | None,
    typer.Option(
        "--telemetry-dir",
        envvar="CLAIMCHECK_TELEMETRY_DIR",
        file_okay=False,
        show_default=False,
        help="The local stack's telemetry folder (OTLP JSON lines spans.jsonl, metrics.jsonl); "
        "default: the running local stack's, else .local-stack/telemetry.",
    ),
]
StackOutputsOption = Annotated[
    Path | None,
    typer.Option(
        "--stack-outputs",
        envvar="CLAIMCHECK_STACK_OUTPUTS",
        show_default=False,
        help="File of `pulumi stack output --json`: its queues and subscriptions are the entities read "
        "(default: the repository's default topology).",
    ),
]
