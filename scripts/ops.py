"""claimcheck-ops: operate the claim-check stack, locally or on Azure, with the same commands.

Locally, with python -m local.stack running, every command finds the stack by itself (its Service
Bus, storage, token issuer and telemetry; `claimcheck-ops env` prints them as exports). On Azure:
--namespace NAMESPACE (Service Bus, signed in with DefaultAzureCredential), --api
https://<app>.azurewebsites.net/api and --audience <apiAudience> (the HTTP API).

Every view fits the terminal (a table, or one record per row when narrow); --json prints everything
as JSON. Every failure is one `error:` line and a non-zero exit code (2 for a usage error, else 1;
130 after Ctrl-C); no payload bytes are ever shown.
"""

from __future__ import annotations

import sys

# Ctrl-C while the CLI loads ends as one line too, not an import traceback.
try:
    import dataclasses
    import logging
    import uuid
    from collections.abc import Iterator
    from contextlib import contextmanager
    from pathlib import Path
    from typing import Annotated, Any, NoReturn

    import typer

    from scripts.ops_api import DocumentRequest, SendProgress, get_work_item, send_document
    from scripts.ops_errors import INTERRUPTED, Interrupted, OpsError
    from scripts.ops_local import api_default, bus_defaults, exports, issuer_default
    from scripts.ops_options import (
        AudienceOption,
        ClientIdOption,
        ConnectionOption,
        FunctionKeyOption,
        LocalApiOption,
        ManagementOption,
        NamespaceOption,
        StackOutputsOption,
        TokenIssuerOption,
    )
    from scripts.ops_output import (
        ACTIVE_COLUMNS,
        DEAD_LETTER_COLUMNS,
        STATS_COLUMNS,
        Column,
        print_json,
        print_messages,
        print_record,
        print_table,
    )
    from scripts.ops_reconcile import reconcile, revoke
    from scripts.ops_release import deploy, smoke
    from scripts.ops_servicebus import (
        BusTarget,
        Entity,
        ReplayStatus,
        first_line,
        peek,
        replay,
        show_dead_letter,
    )
    from scripts.ops_stats import StackEntities, entity_counts
    from scripts.ops_token import LOCAL_CLIENT_ID, TokenSource
    from scripts.ops_trace import trace
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    raise SystemExit(130) from None

# Plain help (rich_markup_mode=None): Rich's markup and Markdown modes would eat placeholders such as
# https://<host>/api or [NAME]; every option gets a named metavar in _cli().
app = typer.Typer(
    help=__doc__,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_show_locals=False,
)
dlq_app = typer.Typer(
    help="Inspect and replay dead-lettered messages.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(dlq_app, name="dlq")

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]
SubscriptionOption = Annotated[
    str | None, typer.Option("--subscription", "-s", help="Subscription of the topic ENTITY.")
]
MaxOption = Annotated[int, typer.Option("--max", min=1, help="At most this many messages.")]
EntityArgument = Annotated[str, typer.Argument(help="Queue name, or topic name with --subscription.")]
SequenceArgument = Annotated[int, typer.Argument(min=1, help="Sequence number of the dead-lettered message.")]


# ---------------------------------------------------------------------------------------------- errors


def _error_line(exc: Exception, entity: Entity | None) -> str:
    """One line for an expected failure; the SDK's own text carries no key or payload bytes."""
    from azure.core.exceptions import ClientAuthenticationError
    from azure.servicebus import exceptions as sb

    text = first_line(exc)
    if isinstance(exc, sb.MessagingEntityNotFoundError):
        if entity is not None and entity.subscription is None:
            # A topic has no receive link of its own, so Service Bus reports it as not found.
            return f"no such entity in the namespace: {text} ({_topic_hint(entity.name)})"
        return f"no such entity in the namespace: {text}"
    if isinstance(exc, sb.ServiceBusConnectionError):
        return f"cannot connect to Service Bus: {text}"
    if isinstance(exc, sb.ServiceBusAuthenticationError | sb.ServiceBusAuthorizationError):
        return f"not authorized: {text}"
    if isinstance(exc, ClientAuthenticationError):
        return f"not signed in: {text} (az login, or a managed identity / AZURE_CLIENT_ID settings)"
    if isinstance(exc, sb.SessionCannotBeLockedError):
        return f"the session is locked by another receiver (a consumer is processing it): {text}"
    if "session" in text.lower():
        return f"{text} (a session entity: give --session ID)"
    return f"Service Bus error ({type(exc).__name__}): {text}"


def _topic_hint(name: str) -> str:
    """What to give for a topic: its subscriptions, as the repository's topology names them."""
    try:
        subscriptions = [e.subscription for e in StackEntities.default().subscriptions if e.name == name]
    except OpsError:
        subscriptions = []
    if subscriptions:
        listed = ", ".join(sorted(str(subscription) for subscription in subscriptions))
        return f"'{name}' is a topic, which holds no messages: give --subscription NAME, one of {listed}"
    return f"if '{name}' is a topic, give --subscription NAME: a topic holds no messages"


@contextmanager
def _reported_errors(entity: Entity | None = None) -> Iterator[None]:
    """Expected failures as one `error:` line; `entity` is what a Service Bus command targeted."""
    from azure.core.exceptions import AzureError
    from claimcheck.errors import BrokerFailed, BrokerUnavailable, StorageFailed, StorageUnavailable

    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except OpsError as exc:
        _fail(str(exc))
    except AzureError as exc:
        _fail(_error_line(exc, entity))
    # The claimcheck adapters' wrapping of an AzureError (adapters/sdk_errors.py).
    except (StorageUnavailable, StorageFailed, BrokerUnavailable, BrokerFailed) as exc:
        cause = exc.__cause__
        _fail(_error_line(cause, entity) if isinstance(cause, AzureError) else str(exc))
    except Exception as exc:  # one line, never a traceback: the operator needs the cause, not frames
        _fail(_unexpected(exc))


def _unexpected(exc: Exception) -> str:
    return f"unexpected failure ({type(exc).__name__}): {first_line(exc)}"


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=1)


def _target(connection_string: str | None, namespace: str | None) -> BusTarget:
    """The Service Bus given, else the running local stack's (scripts/ops_local.py)."""
    connection_string, namespace, _ = bus_defaults(connection_string, namespace)
    return BusTarget(connection_string=connection_string or None, namespace=namespace or None)


# ---------------------------------------------------------------------------------------------- API


@app.command()
def send(
    file: Annotated[
        Path,
        typer.Argument(help="The document to submit (a file).", show_default=False),
    ],
    tenant: Annotated[str, typer.Option(help="Tenant that owns the document.", show_default=False)],
    purpose: Annotated[str, typer.Option(help="Declared purpose, e.g. contract-review.", show_default=False)],
    classification: Annotated[
        str, typer.Option(help="Data classification, e.g. internal.", show_default=False)
    ],
    content_type: Annotated[
        str | None, typer.Option(help="MIME type; guessed from the file name when omitted.")
    ] = None,
    priority: Annotated[str | None, typer.Option(help="Routing priority: normal or high.")] = None,
    work_item_id: Annotated[
        str | None,
        typer.Option(help="Add a version to this existing work item (with --if-match or --new-version)."),
    ] = None,
    if_match: Annotated[
        str | None,
        typer.Option(
            help="The version this write replaces (the work item's current version, or a status ETag): "
            "required for a new version of an existing work item."
        ),
    ] = None,
    new_version: Annotated[
        bool,
        typer.Option(
            "--new-version",
            help="Read the work item's current version first and send it as --if-match (a 412 names "
            "the newer version if another write came in between).",
        ),
    ] = False,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            help="Resend under this key: the API answers the first receipt instead of writing again "
            "(default: a new key, printed if the send is interrupted)."
        ),
    ] = None,
    api: LocalApiOption = None,
    function_key: FunctionKeyOption = None,
    audience: AudienceOption = None,
    token_issuer: TokenIssuerOption = None,
    client_id: ClientIdOption = LOCAL_CLIENT_ID,
    as_json: JsonOption = False,
) -> None:
    """Submit a document (POST /documents, or the direct upload above the inline cap, as
    ClaimCheckClient does) and print the intake receipt."""
    if if_match and new_version:
        _fail("give --if-match VERSION or --new-version, not both")
    request = DocumentRequest(
        file, tenant, purpose, classification, content_type, priority, work_item_id,
        if_match=if_match, new_version=new_version, idempotency_key=idempotency_key,
    )  # fmt: skip
    api = api_default(api)
    tokens = TokenSource(audience, issuer_default(api, token_issuer), client_id)
    progress = SendProgress(idempotency_key or uuid.uuid4().hex)
    try:
        with _reported_errors():
            receipt = send_document(api, request, tokens, function_key, progress)
    except KeyboardInterrupt:
        raise Interrupted(progress.interrupted()) from None
    print_record(f"Accepted {file.name}", receipt, as_json)


@app.command()
def show(
    work_item_id: Annotated[str, typer.Argument(help="The work item id from the receipt.")],
    min_version: Annotated[
        int | None, typer.Option(min=1, help="Only accept a view at least this version.")
    ] = None,
    api: LocalApiOption = None,
    function_key: FunctionKeyOption = None,
    audience: AudienceOption = None,
    token_issuer: TokenIssuerOption = None,
    client_id: ClientIdOption = LOCAL_CLIENT_ID,
    as_json: JsonOption = False,
) -> None:
    """Show a work item's state, payload state, result summary and receipt versions."""
    api = api_default(api)
    tokens = TokenSource(audience, issuer_default(api, token_issuer), client_id)
    with _reported_errors():
        view = get_work_item(api, work_item_id, tokens, min_version, function_key)
    print_record(f"Work item {work_item_id}", view, as_json)


# ---------------------------------------------------------------------------------------------- Bus


@app.command("peek")
def peek_command(
    entity: EntityArgument,
    subscription: SubscriptionOption = None,
    session: Annotated[
        str | None,
        typer.Option(
            help="Browse only this session (its lock is held while browsing). Without it, a session "
            "entity is browsed session by session: every session no consumer holds right now, each "
            "one's lock held for the moment of the browse."
        ),
    ] = None,
    max_count: MaxOption = 50,
    connection_string: ConnectionOption = None,
    namespace: NamespaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Browse active messages without receiving or removing them: metadata only, never the body."""
    where = Entity(entity, subscription)
    # No retries: the walk over sessions ends with a wait that finds none, which the SDK would retry.
    with _reported_errors(where), _target(connection_string, namespace).client(retries=0) as client:
        messages = peek(client, where, dead_letter=False, limit=max_count, session_id=session)
    print_messages(f"Active messages in {where}", messages, as_json, ACTIVE_COLUMNS)


@dlq_app.command("list")
def dlq_list(
    entity: EntityArgument,
    subscription: SubscriptionOption = None,
    max_count: MaxOption = 50,
    work_item: Annotated[
        str | None,
        typer.Option(
            "--work-item",
            metavar="WORK_ITEM_ID",
            help="Only this work item's dead letters (its session id), wherever they are in the queue.",
        ),
    ] = None,
    connection_string: ConnectionOption = None,
    namespace: NamespaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Browse the dead-letter queue (never receives): reason, description and metadata, never the body."""
    where = Entity(entity, subscription)
    with _reported_errors(where), _target(connection_string, namespace).client() as client:
        messages = peek(client, where, dead_letter=True, limit=max_count, work_item=work_item)
    print_messages(f"Dead-lettered messages in {where}", messages, as_json, DEAD_LETTER_COLUMNS)


@dlq_app.command("show")
def dlq_show(
    entity: EntityArgument,
    sequence_number: SequenceArgument,
    subscription: SubscriptionOption = None,
    connection_string: ConnectionOption = None,
    namespace: NamespaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """One dead-lettered message: metadata and routing property values (other properties by name only)."""
    where = Entity(entity, subscription)
    with _reported_errors(where), _target(connection_string, namespace).client() as client:
        detail = show_dead_letter(client, where, sequence_number)
        if detail is None:
            raise OpsError(f"sequence number {sequence_number} is not in the dead-letter queue of {where}")
    record = dataclasses.asdict(detail.summary) | {
        key: value for key, value in dataclasses.asdict(detail).items() if key != "summary"
    }
    print_record(f"Dead-lettered message {sequence_number} of {where}", record, as_json)


@dlq_app.command("replay")
def dlq_replay(
    entity: EntityArgument,
    sequence_number: Annotated[
        int | None, typer.Argument(min=1, help="Sequence number of the dead-lettered message.")
    ] = None,
    replay_all: Annotated[bool, typer.Option("--all", help="Replay every message now in the DLQ.")] = False,
    subscription: SubscriptionOption = None,
    max_count: Annotated[int, typer.Option("--max", min=1, help="With --all: at most this many.")] = 1000,
    connection_string: ConnectionOption = None,
    namespace: NamespaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Move dead-lettered messages back to their entity, exactly once, after the cause is fixed.

    Each message is received from the DLQ in peek-lock, a copy (same body, application properties,
    session id, correlation id, content type, subject) is sent with the message id
    `<original id>.replay.<DLQ sequence number>`, and only then is the DLQ message completed.
    A subscription's message is sent to its topic: every subscription whose rules match gets it again,
    and their consumers' idempotency ledgers absorb that.

    Crash between send and complete: the DLQ message stays (its lock simply expires) and the copy is
    already on the entity. Run the same replay again: the copy gets the same message id, so the entity's
    duplicate detection drops it within its window, and past the window the consumer's idempotency
    ledger (keyed by the envelope's work item, version and purpose, not by message id) makes it a
    no-op; then the DLQ message is completed. On an entity without duplicate detection only the
    ledger protects. Exit code 1 if any message was not found or not fully replayed.
    """
    if (sequence_number is None) == (not replay_all):
        _fail("give either a SEQUENCE_NUMBER or --all")
    where = Entity(entity, subscription)
    with _reported_errors(where), _target(connection_string, namespace).client() as client:
        wanted = None if replay_all else [sequence_number or 0]
        results = replay(client, where, wanted, limit=max_count)
    if as_json:
        print_json([dataclasses.asdict(result) for result in results])
    else:
        columns = [
            Column("sequence_number", "seq"),
            Column("status"),
            Column("original_message_id"),
            Column("replay_message_id"),
            Column("detail", text=True),
        ]
        rows = [dataclasses.asdict(result) for result in results]
        print_table(f"Replay from the dead-letter queue of {where}", rows, columns)
    failures = [result for result in results if result.status is not ReplayStatus.REPLAYED]
    for failure in failures:
        typer.echo(f"error: sequence number {failure.sequence_number}: {failure.detail}", err=True)
    if failures:
        raise typer.Exit(code=1)


@app.command()
def stats(
    management_connection_string: ManagementOption = None,
    connection_string: ConnectionOption = None,
    namespace: NamespaceOption = None,
    stack_outputs: StackOutputsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Active, dead-letter and scheduled counts of the stack's queues and subscriptions.

    Each entity the stack outputs (or the default topology) name is read by name from the management
    API's runtime properties with the Service Bus administration client, on Azure and on the local
    emulator alike (its management plane: port 5300 beside AMQP 5672): an operator's entity-scoped Data
    Owner roles suffice, no namespace-wide listing.
    """
    with _reported_errors():
        if not (connection_string or namespace):
            connection_string, namespace, management_connection_string = bus_defaults(
                connection_string, namespace, management_connection_string
            )
        target = _target(connection_string, namespace)
        entities = StackEntities.from_file(stack_outputs) if stack_outputs else StackEntities.default()
        counts = entity_counts(target, entities, management_connection_string)
    rows = [dataclasses.asdict(count) for count in counts]
    if as_json:
        print_json(rows)
    else:
        print_table("Message counts", rows, STATS_COLUMNS)


# ---------------------------------------------------------------------------------------------- release

app.command()(deploy)
app.command()(smoke)
app.command()(reconcile)
app.command()(revoke)
app.command()(trace)


@app.command("env")
def env_command() -> None:
    """Print `export` lines for the running local stack (API, token issuer, Service Bus, storage,
    telemetry), for `eval "$(claimcheck-ops env)"`. Without them claimcheck-ops finds the stack by
    itself; the exports serve other tools (curl, scripts, the SDKs)."""
    with _reported_errors():
        lines = exports()
    for line in lines:
        typer.echo(line)


@app.callback()
def _quiet_sdk_logs() -> None:
    # The SDKs log connection retries as warnings; the one-line `error:` is what an operator needs.
    logging.getLogger("azure").setLevel(logging.CRITICAL)


def _cli() -> Any:
    """The Click command behind `app` (Typer's vendored Click), each option and argument showing a
    named placeholder (Typer's own are type names, `<str>`, and `<bool>` on flags): --tenant TENANT,
    SEQUENCE_NUMBER, also in usage errors ("Invalid value for 'SEQUENCE_NUMBER'")."""
    command = typer.main.get_command(app)
    pending: list[Any] = [command]
    while pending:
        current = pending.pop()
        pending.extend(getattr(current, "commands", {}).values())
        param: Any
        for param in current.params:
            flag = param.param_type_name == "option" and (param.is_flag or param.count)
            if not flag and param.name and param.metavar is None:
                param.metavar = param.name.upper()
            if param.param_type_name == "argument":
                # Typer lists an argument as `FILE <path>`: the name is the placeholder already.
                param.display_type_rich = lambda ctx: None
    return command


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: every failure ends as one `error:` line and a non-zero exit code,
    usage errors (unknown command or option, missing or invalid argument) included."""
    try:
        code = _cli().main(args=argv, prog_name="claimcheck-ops", standalone_mode=False)
    except typer.TyperException as exc:  # a usage error; its `ctx` says which command
        context = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":  # `claimcheck-ops` or `claimcheck-ops dlq` alone
            typer.echo(exc.format_message())
            return 0
        command = context.command_path if context is not None else "claimcheck-ops"
        message = " ".join(exc.format_message().split())
        typer.echo(f"error: {message} (see `{command} --help`)", err=True)
        return int(exc.exit_code)
    except Interrupted as exc:  # Ctrl-C in a command that can say what it left behind
        typer.echo(f"interrupted; {exc}", err=True)
        return INTERRUPTED
    except KeyboardInterrupt:  # Ctrl-C outside a command (Typer turns one inside into exit 130)
        typer.echo("interrupted", err=True)
        return INTERRUPTED
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        return 1
    except OpsError as exc:  # expected, but raised outside a command's _reported_errors
        typer.echo(f"error: {exc}", err=True)
        return 1
    except Exception as exc:
        typer.echo(f"error: {_unexpected(exc)}", err=True)
        return 1
    if code == INTERRUPTED:  # Typer's answer to a Ctrl-C inside a command: say so, in one line
        typer.echo("interrupted", err=True)
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
