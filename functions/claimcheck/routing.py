"""Which container holds a purpose's payloads, and how long a container keeps every object locked.

Most purposes share the payload container (``CLAIMCHECK_PAYLOAD_CONTAINER``). A purpose whose payloads
are evidence (``evidence-archive``) gets a container of its own (``CLAIMCHECK_PURPOSE_CONTAINERS``), so
that a production stack can put that container under a time-based, version-level WORM policy
(``CLAIMCHECK_IMMUTABLE_CONTAINERS``: container → days) without blocking the deletes of the purposes that
clean up after use. Both settings are written by infra/ and local/stack.py from the topology.

The app never asks a locked container to delete an object before its lock ends: the reconciler waits
(``locked_until``), and a purpose that deletes after use may not be routed to a locked container.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from claimcheck.policy import CleanupPolicy, PurposePolicy
from claimcheck.settings import (
    IMMUTABLE_CONTAINERS_SETTING,
    PURPOSE_CONTAINERS_SETTING,
    Settings,
    SettingsError,
)
from claimcheck.storage import PayloadStore


@dataclass(frozen=True)
class PayloadRoutes:
    """Purpose → container, and container → days every new object stays immutable (WORM)."""

    default: str
    by_purpose: Mapping[str, str] = field(default_factory=dict)
    immutable_days: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> PayloadRoutes:
        return cls(settings.payload_container, settings.purpose_containers, settings.immutable_containers)

    def container_for(self, purpose: str) -> str:
        return self.by_purpose.get(purpose, self.default)

    def containers(self) -> tuple[str, ...]:
        """Every container the app writes to, the shared one first."""
        return tuple(dict.fromkeys((self.default, *self.by_purpose.values())))

    def locked_until(self, container: str, created_at: datetime) -> datetime | None:
        """When an object created at ``created_at`` in ``container`` may be deleted; None: any time."""
        days = self.immutable_days.get(container)
        return None if not days else created_at + timedelta(days=days)

    def check(self, purposes: Mapping[str, PurposePolicy]) -> None:
        """Refuse routes that name unknown purposes, and deleting purposes in a locked container."""
        unknown = sorted(set(self.by_purpose) - set(purposes))
        if unknown:
            raise SettingsError(f"{PURPOSE_CONTAINERS_SETTING} names unknown purposes {unknown}")
        stray = sorted(set(self.immutable_days) - set(self.containers()))
        if stray:
            raise SettingsError(f"{IMMUTABLE_CONTAINERS_SETTING} names containers no purpose uses: {stray}")
        for name, policy in sorted(purposes.items()):
            container = self.container_for(name)
            if self.immutable_days.get(container) and policy.cleanup is not CleanupPolicy.RETAIN:
                raise SettingsError(
                    f"{IMMUTABLE_CONTAINERS_SETTING}: container {container!r} is immutable, but purpose "
                    f"{name!r} routed to it deletes its payloads after use ({policy.cleanup.value})"
                )


class PayloadStores:
    """One payload store per container, chosen by the payload's purpose."""

    def __init__(self, routes: PayloadRoutes, stores: Mapping[str, PayloadStore]) -> None:
        missing = sorted(set(routes.containers()) - set(stores))
        if missing:
            raise ValueError(f"no payload store for containers {missing}")
        self.routes = routes
        self._stores = dict(stores)

    @classmethod
    def single(cls, store: PayloadStore, container: str = "payloads") -> PayloadStores:
        """Every purpose in one store (one container)."""
        return cls(PayloadRoutes(container), {container: store})

    def for_purpose(self, purpose: str) -> PayloadStore:
        return self._stores[self.routes.container_for(purpose)]

    def default(self) -> PayloadStore:
        return self._stores[self.routes.default]

    def each(self) -> Iterator[tuple[str, PayloadStore]]:
        """(container, store) for every container, each once, the shared one first."""
        for container in self.routes.containers():
            yield container, self._stores[container]
