"""The issuer's signing keys, cached: refreshed on an unknown ``kid``, but at a bounded rate.

Entra ID rolls its signing keys: a token may name a ``kid`` that the cached set does not hold yet, so
an unknown ``kid`` triggers a refresh. A caller could send a fresh random ``kid`` with every request,
so refreshes are spaced at least ``min_refresh_interval`` apart: in between, an unknown ``kid`` is
simply unknown (401). The fetch itself is injected (claimcheck.adapters.jwks does it over HTTP).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import jwt

from claimcheck.auth import KeysUnavailable

log = logging.getLogger(__name__)

DEFAULT_MIN_REFRESH_SECONDS = 60.0
DEFAULT_MAX_AGE_SECONDS = 24 * 3600.0


class CachedSigningKeys:
    """``SigningKeys`` over a JWKS document fetched by ``fetch``."""

    def __init__(
        self,
        fetch: Callable[[], Mapping[str, Any]],
        *,
        min_refresh_interval: float = DEFAULT_MIN_REFRESH_SECONDS,
        max_age: float = DEFAULT_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._min_refresh_interval = min_refresh_interval
        self._max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, Any] = {}
        self._fetched_at: float | None = None  # last successful fetch (ages the keys)
        self._attempted_at: float | None = None  # last fetch, successful or not (what the rate bounds)
        self.fetches = 0  # how many times the JWKS was fetched (observable by tests and logs)

    def key_for(self, kid: str) -> Any | None:
        with self._lock:
            now = self._clock()
            stale = self._fetched_at is None or now - self._fetched_at >= self._max_age
            if (stale or kid not in self._keys) and self._may_refresh(now):
                self._refresh(now)
            if not self._keys:
                raise KeysUnavailable("no signing keys: the last fetch failed (retried at a bounded rate)")
            return self._keys.get(kid)

    def _may_refresh(self, now: float) -> bool:
        return self._attempted_at is None or now - self._attempted_at >= self._min_refresh_interval

    def _refresh(self, now: float) -> None:
        self.fetches += 1
        self._attempted_at = now
        try:
            document = self._fetch()
            key_set = jwt.PyJWKSet.from_dict(dict(document))
        except (jwt.PyJWTError, OSError, ValueError) as error:
            # Keep serving the keys we have; with none, 503 until a later (rate-bounded) fetch succeeds.
            log.warning(
                "signing key fetch failed (%s); %d cached key(s)", type(error).__name__, len(self._keys)
            )
            return
        self._keys = {key.key_id: key.key for key in key_set.keys if key.key_id}
        self._fetched_at = now
        log.info("signing keys refreshed: %d key(s)", len(self._keys))
