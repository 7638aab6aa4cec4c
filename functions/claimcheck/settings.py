"""Names shared by the Function App, the infrastructure and the local stack, and the app's settings.

The infrastructure (infra/) writes these app settings; the local stack writes the same names into
local.settings.json. Keeping the names here, in one place, is what lets a test prove they agree.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from types import MappingProxyType
from typing import Any, TypeVar

from claimcheck.errors import ClaimCheckError

# Connection *names* (the `connection=` of a binding). On Azure each one is expanded by the host into
# identity-based settings (`<NAME>__fullyQualifiedNamespace`, `<NAME>__blobServiceUri`, ...); locally
# the bare name holds an emulator connection string.
SERVICEBUS_CONNECTION = "ServiceBusConnection"
STORAGE_CONNECTION = "PayloadStorage"

# Default entity names; the topology spec (infra/topology/spec.py) is their source of truth.
DOCUMENTS_QUEUE = "documents"
# The trigger binds to this app setting (`%CLAIMCHECK_DOCUMENTS_QUEUE%`), resolved by the host: the
# topology's queue name reaches the trigger through it, on Azure and on the local host alike.
DOCUMENTS_QUEUE_SETTING = "CLAIMCHECK_DOCUMENTS_QUEUE"
RESULTS_TOPIC = "results"
PAYLOAD_CONTAINER = "payloads"
REGISTRY_TABLE = "payloadregistry"
IDEMPOTENCY_TABLE = "idempotency"
WORK_ITEMS_TABLE = "workitems"
AUDIT_TABLE = "cleanupaudit"
RESULTS_TABLE = "results"
# The purpose whose payloads are evidence (claimcheck.policy: retained, never deleted after use) and its
# own container (claimcheck.routing), so that production can keep that container under a WORM policy while
# the other purposes delete from the shared one. The topology's default routes, and the app's when the
# setting is absent (an operator's `claimcheck-ops reconcile` must not look for evidence elsewhere).
EVIDENCE_PURPOSE = "evidence-archive"
EVIDENCE_CONTAINER = "evidence"
DEFAULT_PURPOSE_CONTAINERS: Mapping[str, str] = MappingProxyType({EVIDENCE_PURPOSE: EVIDENCE_CONTAINER})

# Blob index tag on objects whose publish is not confirmed yet. The storage lifecycle rule (infra/)
# deletes objects still carrying it after a day: the backstop behind the reconciler. These are the
# defaults of the topology spec (infra/topology), its one source: infra/ writes the topology's name and
# value into the two app settings below, which the app reads (Settings.provisional_tag); a confirmed
# publish sets the same tag to ACTIVE_TAG_VALUE.
PROVISIONAL_TAG_NAME = "claimcheck-state"
PROVISIONAL_TAG_VALUE = "provisional"
ACTIVE_TAG_VALUE = "active"
PROVISIONAL_TAG_NAME_SETTING = "CLAIMCHECK_PROVISIONAL_TAG_NAME"
PROVISIONAL_TAG_VALUE_SETTING = "CLAIMCHECK_PROVISIONAL_TAG_VALUE"

# Who this app is when it reads payloads (checked against each purpose's allowed consumers), and the
# allowed consumers per purpose. infra/ writes both (consumer_settings below) with the app's managed
# identity's principal id, local/stack.py with the local stand-in for it; unset, the purpose table's
# defaults apply (claimcheck.policy.DEFAULT_PURPOSES: readers = {"claimcheck-consumer"}).
CONSUMER_IDENTITY_SETTING = "CLAIMCHECK_CONSUMER_IDENTITY"
PURPOSE_CONSUMERS_SETTING = "CLAIMCHECK_PURPOSE_CONSUMERS"
DEFAULT_CONSUMER_IDENTITY = "claimcheck-consumer"

# Bearer-token validation (claimcheck.auth); infra/ writes Entra ID's values, local/stack.py the local
# issuer's. Without them every HTTP route answers 503: the app never runs without its token gate.
ISSUER_SETTING = "CLAIMCHECK_AUTH_ISSUER"
AUDIENCE_SETTING = "CLAIMCHECK_AUTH_AUDIENCES"  # comma-separated: the application ID URI and client id
JWKS_URI_SETTING = "CLAIMCHECK_AUTH_JWKS_URI"
LEEWAY_SETTING = "CLAIMCHECK_AUTH_LEEWAY_SECONDS"


# Where each purpose's payloads go (JSON purpose -> container; unlisted purposes: the payload container)
# and which containers keep every new object immutable for how many days (JSON container -> days).
# infra/ and local/stack.py write both from the topology (claimcheck.routing reads them).
PURPOSE_CONTAINERS_SETTING = "CLAIMCHECK_PURPOSE_CONTAINERS"
IMMUTABLE_CONTAINERS_SETTING = "CLAIMCHECK_IMMUTABLE_CONTAINERS"


# The largest request body POST /api/documents takes (CLAIMCHECK_MAX_INLINE_REQUEST_BYTES); larger documents
# go through the direct upload (claimcheck.uploads), and ClaimCheckClient switches to it above this same
# number, so the client and the API cannot disagree. Well under the Functions front end's request limit
# (FUNCTIONS_REQUEST_LIMIT_BYTES, 100 MB), which a configured cap may not exceed.
INLINE_REQUEST_MAX_BYTES = 32 * 1024 * 1024
FUNCTIONS_REQUEST_LIMIT_BYTES = 100 * 1024 * 1024

# The Functions host's own request-body limit (bytes; default 104,857,600), enforced before the worker is
# invoked: on Azure the worker receives the whole body with the invocation, so this, not the app's cap,
# is what bounds the memory a request can take there. infra/ sets it and the local host applies it, both
# as host_request_body_limit(the inline cap).
HOST_REQUEST_LIMIT_SETTING = "FUNCTIONS_REQUEST_BODY_SIZE_LIMIT"
# The cap counts the whole request body, multipart framing included; the host's limit is this much above
# it, so a body somewhat over the cap (a document of exactly the cap sent as multipart: boundaries, part
# headers, form fields) still reaches the app, which answers 413 use_direct_upload naming the upload
# flow, while anything further above is refused by the host before the worker buffers it. 1 MiB covers
# the most framing claimcheck.http_api's parser accepts (every part at its header limits; the unit test
# tests/unit/claimcheck/test_host_request_limit.py computes it from those limits).
HOST_REQUEST_MARGIN_BYTES = 1024 * 1024


def host_request_body_limit(inline_cap: int) -> int:
    """FUNCTIONS_REQUEST_BODY_SIZE_LIMIT for an inline cap of ``inline_cap`` bytes: the one derivation
    infra/ (the Function App's app setting) and local/stack.py (the local host's limit) both use."""
    return inline_cap + HOST_REQUEST_MARGIN_BYTES


_Value = TypeVar("_Value")


class SettingsError(ClaimCheckError, ValueError):
    """A required setting is missing or malformed; the message names the setting."""


@dataclass(frozen=True)
class ProvisionalTag:
    """The blob index tag (name, value) an object carries until its publish is confirmed."""

    name: str = PROVISIONAL_TAG_NAME
    value: str = PROVISIONAL_TAG_VALUE


@dataclass(frozen=True)
class Settings:
    """What the Function App reads from its environment (app settings or local.settings.json)."""

    environment: str
    documents_queue: str = DOCUMENTS_QUEUE
    results_topic: str = RESULTS_TOPIC
    payload_container: str = PAYLOAD_CONTAINER
    registry_table: str = REGISTRY_TABLE
    idempotency_table: str = IDEMPOTENCY_TABLE
    work_items_table: str = WORK_ITEMS_TABLE
    audit_table: str = AUDIT_TABLE
    results_table: str = RESULTS_TABLE
    inline_threshold_bytes: int = 16 * 1024
    max_payload_bytes: int = 2 * 1024 * 1024 * 1024
    # POST /api/documents refuses a larger body before reading it (413 use_direct_upload).
    max_inline_request_bytes: int = INLINE_REQUEST_MAX_BYTES
    # The consumer dead-letters on this delivery itself (with a precise reason) instead of letting
    # the broker do it with a generic MaxDeliveryCountExceeded; matches the queue's MaxDeliveryCount.
    max_delivery_count: int = 5
    # How long a published version may stay invisible before a consumer gives up waiting for it.
    visibility_grace_seconds: int = 120
    # In-process polls (backoff from 50 ms, capped at 1 s) before answering Retry for a version
    # that is not visible yet: the Functions host redelivers an abandoned message at once.
    visibility_polls: int = 6
    # How long a provisional object may wait for its publish before the reconciler removes it.
    orphan_grace_seconds: int = 3600
    # A processed record under a sync or async cleanup policy normally leaves that state within
    # milliseconds; one this old was left by a crash between `processed` and its cleanup, which the
    # reconciler then finishes (the grace keeps it from racing a consumer mid-settlement).
    interrupted_cleanup_grace_seconds: int = 300
    # The reconciler raises an alert line when an entity's oldest dead-lettered message is older.
    dead_letter_alert_age_seconds: int = 3600
    # The lease of an attempt's idempotency claim. The live attempt renews it every third of this,
    # so a claim that is not renewed for this long belongs to a crashed attempt and is taken over.
    claim_lease_seconds: int = 30
    # How long a delivery waits in-process for another attempt's claim before answering Retry.
    # Waiting spends no delivery; keep it under the host's maxAutoLockRenewalDuration (5 min).
    claim_wait_seconds: int = 120
    # How long a delivery waits in-process (with backoff) for unreachable storage or broker before
    # answering Retry, which spends a delivery.
    outage_wait_seconds: int = 60
    # A publish (intake or result event) that the broker has not confirmed within this many seconds,
    # retries included, fails; intake then answers 503.
    publish_timeout_seconds: int = 5
    # After a failed intake publish, intake answers 503 at once for this long, then tries again.
    publish_cool_down_seconds: int = 5
    # How long an intake Idempotency-Key answers with its first receipt (claimcheck.intake_keys);
    # after that the key may be used again. A day covers any agent's retries after a timeout.
    idempotency_window_seconds: int = 24 * 3600
    # An accepted write's visibility deadline (receipt.visibility_deadline): a status read of a
    # reserved version answers awaiting_visibility inside it and propagation_exceeded after it.
    visibility_window_seconds: int = 30
    # Connections each storage client keeps open per host (requests' pool_maxsize, default 10): one per
    # invocation that may call storage at once in a worker, so none is discarded and reopened (a new TLS
    # handshake on Azure). 64 covers host.json: maxConcurrentSessions + maxConcurrentCalls + the HTTP
    # requests the local host runs at once (tests/unit/claimcheck/test_storage_transport.py checks it).
    storage_pool_connections: int = 64
    consumer_identity: str = DEFAULT_CONSUMER_IDENTITY
    # purpose → the consumer identities allowed to read its payloads (overrides the purpose table).
    purpose_consumers: Mapping[str, frozenset[str]] = field(default_factory=dict)
    provisional_tag: ProvisionalTag = ProvisionalTag()
    # purpose → its own container (claimcheck.routing); container → days its objects stay immutable.
    purpose_containers: Mapping[str, str] = field(default_factory=lambda: DEFAULT_PURPOSE_CONTAINERS)
    immutable_containers: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings from app settings (``os.environ`` by default), row by row of ``SETTINGS``: an
        unset or empty setting takes the row's default; a malformed one is a SettingsError naming it."""
        values = os.environ if env is None else env
        parsed: dict[str, Any] = {}
        for row in SETTINGS:
            raw = values.get(row.name)
            parsed[row.field] = row.parse(row.name, raw) if raw else row.default()
        tag = ProvisionalTag(parsed.pop("provisional_tag.name"), parsed.pop("provisional_tag.value"))
        return cls(**parsed, provisional_tag=_checked_tag(tag))

    def to_env(self) -> dict[str, str]:
        """Every setting of ``SETTINGS`` as the app reads it back (``from_env(s.to_env()) == s``): what
        infra/ writes as app settings and the local stack into local.settings.json."""
        return {row.name: row.format(_attribute(self, row.field)) for row in SETTINGS}


def _attribute(settings: Settings, path: str) -> Any:
    value: Any = settings
    for part in path.split("."):
        value = getattr(value, part)
    return value


@dataclass(frozen=True)
class Setting:
    """One row of the settings table: the ``Settings`` field (``a.b`` for a part of one), the app
    setting's name, its parser (name, text) -> value, and back to text. The default is the field's own
    (``default_value`` where the dataclass has none, e.g. the environment)."""

    field: str
    name: str
    parse: Callable[[str, str], Any]
    format: Callable[[Any], str] = str
    default_value: Any = None

    def default(self) -> Any:
        if self.default_value is not None:
            return self.default_value
        owner, _, part = self.field.partition(".")
        declared = next(f for f in fields(Settings) if f.name == owner)
        factory = declared.default_factory
        value = factory() if declared.default is MISSING and callable(factory) else declared.default
        return getattr(value, part) if part else value


def _text(name: str, raw: str) -> str:
    return raw


def _positive(name: str, raw: str) -> int:
    try:
        number = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a whole number, got {raw!r}") from None
    if number <= 0:
        raise SettingsError(f"{name} must be positive, got {number}")
    return number


def _inline_cap(name: str, raw: str) -> int:
    number = _positive(name, raw)
    if number > FUNCTIONS_REQUEST_LIMIT_BYTES:
        raise SettingsError(
            f"{name} must be at most {FUNCTIONS_REQUEST_LIMIT_BYTES} (an inline body is held whole in "
            f"memory; larger documents take the direct upload), got {number}"
        )
    return number


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(
        {key: sorted(item) if isinstance(item, frozenset) else item for key, item in sorted(value.items())},
        separators=(",", ":"),
    )


def _number(field_name: str, name: str) -> Setting:
    return Setting(field_name, name, _positive)


def _name(field_name: str, name: str) -> Setting:
    return Setting(field_name, name, _text)


# The one table of the app's settings (issue 11): Settings.from_env and Settings.to_env read it, infra/
# (infra/app_settings.py) and the local stack (local/stack.py) write Settings.to_env() of the settings
# their topology gives, and every other module names a setting through SETTING_NAMES.
SETTINGS: tuple[Setting, ...] = (
    Setting("environment", "CLAIMCHECK_ENVIRONMENT", _text, default_value="local"),
    _name("documents_queue", DOCUMENTS_QUEUE_SETTING),
    _name("results_topic", "CLAIMCHECK_RESULTS_TOPIC"),
    _name("payload_container", "CLAIMCHECK_PAYLOAD_CONTAINER"),
    _name("registry_table", "CLAIMCHECK_REGISTRY_TABLE"),
    _name("idempotency_table", "CLAIMCHECK_IDEMPOTENCY_TABLE"),
    _name("work_items_table", "CLAIMCHECK_WORK_ITEMS_TABLE"),
    _name("audit_table", "CLAIMCHECK_AUDIT_TABLE"),
    _name("results_table", "CLAIMCHECK_RESULTS_TABLE"),
    _number("inline_threshold_bytes", "CLAIMCHECK_INLINE_THRESHOLD_BYTES"),
    _number("max_payload_bytes", "CLAIMCHECK_MAX_PAYLOAD_BYTES"),
    Setting("max_inline_request_bytes", "CLAIMCHECK_MAX_INLINE_REQUEST_BYTES", _inline_cap),
    _number("max_delivery_count", "CLAIMCHECK_MAX_DELIVERY_COUNT"),
    _number("visibility_grace_seconds", "CLAIMCHECK_VISIBILITY_GRACE_SECONDS"),
    _number("visibility_polls", "CLAIMCHECK_VISIBILITY_POLLS"),
    _number("orphan_grace_seconds", "CLAIMCHECK_ORPHAN_GRACE_SECONDS"),
    _number("interrupted_cleanup_grace_seconds", "CLAIMCHECK_INTERRUPTED_CLEANUP_GRACE_SECONDS"),
    _number("dead_letter_alert_age_seconds", "CLAIMCHECK_DEAD_LETTER_ALERT_AGE_SECONDS"),
    _number("claim_lease_seconds", "CLAIMCHECK_CLAIM_LEASE_SECONDS"),
    _number("claim_wait_seconds", "CLAIMCHECK_CLAIM_WAIT_SECONDS"),
    _number("outage_wait_seconds", "CLAIMCHECK_OUTAGE_WAIT_SECONDS"),
    _number("publish_timeout_seconds", "CLAIMCHECK_PUBLISH_TIMEOUT_SECONDS"),
    _number("publish_cool_down_seconds", "CLAIMCHECK_PUBLISH_COOL_DOWN_SECONDS"),
    _number("idempotency_window_seconds", "CLAIMCHECK_IDEMPOTENCY_WINDOW_SECONDS"),
    _number("visibility_window_seconds", "CLAIMCHECK_VISIBILITY_WINDOW_SECONDS"),
    _number("storage_pool_connections", "CLAIMCHECK_STORAGE_POOL_CONNECTIONS"),
    _name("consumer_identity", CONSUMER_IDENTITY_SETTING),
    Setting("purpose_consumers", PURPOSE_CONSUMERS_SETTING, lambda _, raw: _purpose_consumers(raw), _json),
    _name("provisional_tag.name", PROVISIONAL_TAG_NAME_SETTING),
    _name("provisional_tag.value", PROVISIONAL_TAG_VALUE_SETTING),
    Setting(
        "purpose_containers",
        PURPOSE_CONTAINERS_SETTING,
        lambda name, raw: _json_mapping({name: raw}, name, _container_name),
        _json,
    ),
    Setting(
        "immutable_containers",
        IMMUTABLE_CONTAINERS_SETTING,
        lambda name, raw: _json_mapping({name: raw}, name, _whole_days),
        _json,
    ),
)
# Field -> app setting name, for code that names a setting (scripts, tests, infra): never a literal.
SETTING_NAMES: Mapping[str, str] = MappingProxyType({row.field: row.name for row in SETTINGS})


# Azure Blob container names: 3-63 lower-case letters, digits and single hyphens, starting alphanumeric.
CONTAINER_NAME = re.compile(r"^(?=.{3,63}$)[a-z0-9]+(-[a-z0-9]+)*$")


def _container_name(value: object) -> str | None:
    return value if isinstance(value, str) and CONTAINER_NAME.fullmatch(value) else None


def _whole_days(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _json_mapping(
    values: Mapping[str, str], name: str, parse: Callable[[object], _Value | None]
) -> dict[str, _Value]:
    """A JSON object setting whose values ``parse`` accepts (it answers None for a bad one)."""
    raw = values.get(name)
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        raise SettingsError(f"{name} is not JSON") from None
    if not isinstance(parsed, dict):
        raise SettingsError(f"{name} must be a JSON object")
    checked: dict[str, _Value] = {}
    for key, value in parsed.items():
        good = parse(value)
        if good is None:
            raise SettingsError(f"{name}: {key!r} has an invalid value {value!r}")
        checked[str(key)] = good
    return checked


# Blob index tag keys and values: letters, digits, space and + - . / : = _ (keys 1-128, values 0-256).
_BLOB_TAG = re.compile(r"^[A-Za-z0-9 +\-./:=_]{1,128}$")


def _checked_tag(tag: ProvisionalTag) -> ProvisionalTag:
    checked = ((PROVISIONAL_TAG_NAME_SETTING, tag.name), (PROVISIONAL_TAG_VALUE_SETTING, tag.value))
    for setting, text in checked:
        if not _BLOB_TAG.fullmatch(text):
            raise SettingsError(f"{setting} is not a blob index tag (letters, digits, space, + - . / : = _)")
    if tag.value == ACTIVE_TAG_VALUE:
        raise SettingsError(
            f"{PROVISIONAL_TAG_VALUE_SETTING} must differ from {ACTIVE_TAG_VALUE!r}, "
            "the value of a confirmed object"
        )
    return tag


def consumer_settings(
    consumer_identity: str, purposes: Iterable[str], consumed: Collection[str] | None = None
) -> dict[str, str]:
    """The consumer's identity and each purpose's allowed consumers: that identity for the purposes it
    consumes (``consumed``; None = all), nobody for the others.

    One function for both deployments: infra/ passes the managed identity's principal id and the stack
    config's consumed purposes, the local stack its stand-in and all; both pass the purpose table's
    names, so no purpose is left to the purpose table's default readers.
    """
    if not consumer_identity:
        raise SettingsError(f"{CONSUMER_IDENTITY_SETTING} needs the consumer's identity")
    names = sorted(purposes)
    unknown = sorted(set(consumed or ()) - set(names))
    if unknown:
        raise SettingsError(f"{PURPOSE_CONSUMERS_SETTING} names unknown purposes {unknown}")
    consumers = {
        purpose: [consumer_identity] if consumed is None or purpose in consumed else [] for purpose in names
    }
    return {
        CONSUMER_IDENTITY_SETTING: consumer_identity,
        PURPOSE_CONSUMERS_SETTING: json.dumps(consumers, separators=(",", ":")),
    }


def _purpose_consumers(raw: str | None) -> dict[str, frozenset[str]]:
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        raise SettingsError(f"{PURPOSE_CONSUMERS_SETTING} is not JSON") from None
    if not isinstance(parsed, dict) or not all(
        isinstance(readers, list) and all(isinstance(reader, str) and reader for reader in readers)
        for readers in parsed.values()
    ):
        raise SettingsError(f"{PURPOSE_CONSUMERS_SETTING} must map each purpose to a list of identities")
    return {str(purpose): frozenset(readers) for purpose, readers in parsed.items()}
