"""Bearer-token validation (claimcheck.auth) with real RSA keys and PyJWT, and the cached key set."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import jwt
import pytest
from claimcheck.access import AccessForbidden, AccessTable
from claimcheck.adapters.jwks import jwks_fetcher
from claimcheck.auth import (
    AppRole,
    KeysUnavailable,
    MissingRole,
    TokenRules,
    Unauthenticated,
    authenticate,
    require_role,
)
from claimcheck.settings import SettingsError
from claimcheck.signing_keys import CachedSigningKeys

from local.identity import SigningKey, TokenMinter, identity_named

BASE = "http://127.0.0.1:7090"
KEY = SigningKey.generate()
MINTER = TokenMinter(KEY, base_url=BASE)
RULES = TokenRules(
    issuer=MINTER.issuer, audiences=(MINTER.audience,), jwks_uri=f"{BASE}/keys", leeway_seconds=60
)
PRODUCER = identity_named("local-producer")


class Keys:
    def __init__(self, *keys: SigningKey) -> None:
        self.keys = {key.kid: key.private_key.public_key() for key in keys}

    def key_for(self, kid: str) -> Any | None:
        return self.keys.get(kid)


def _bearer(token: str) -> str:
    return f"Bearer {token}"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def test_a_valid_token_proves_the_caller_and_its_roles() -> None:
    caller = authenticate(_bearer(MINTER.token(PRODUCER)), RULES, Keys(KEY))
    assert (caller.object_id, caller.app_id) == (PRODUCER.object_id, PRODUCER.app_id)
    assert caller.roles == {"Documents.Submit", "WorkItems.Read"}
    require_role(caller, [AppRole.SUBMIT])
    with pytest.raises(MissingRole):
        require_role(caller, [AppRole.OPERATE])


def test_the_groups_claim_is_read_and_a_malformed_one_refused() -> None:
    caller = authenticate(_bearer(MINTER.sign(_claims(groups=["g-1", "g-2"]))), RULES, Keys(KEY))
    assert caller.groups == {"g-1", "g-2"}
    assert authenticate(_bearer(MINTER.token(PRODUCER)), RULES, Keys(KEY)).groups == frozenset()
    for malformed in ("g-1", [1], {"g": 1}):
        with pytest.raises(Unauthenticated, match="groups claim is malformed"):
            authenticate(_bearer(MINTER.sign(_claims(groups=malformed))), RULES, Keys(KEY))


def _claims(**changes: Any) -> dict[str, Any]:
    claims = MINTER.claims(PRODUCER)
    claims.update(changes)
    return {key: value for key, value in claims.items() if value is not None}


def _forged_hs256() -> str:
    """HS256 keyed with the issuer's public key: the classic algorithm-confusion forgery."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": KEY.kid}).encode())
    body = _b64(json.dumps(_claims()).encode())
    signature = hmac.new(KEY.public_pem(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(signature)}"


def _alg_none() -> str:
    header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": KEY.kid}).encode())
    return f"{header}.{_b64(json.dumps(_claims()).encode())}."


NOW = int(time.time())
BAD_TOKENS = {
    "no header": (None, "no Authorization"),
    "basic auth": ("Basic dXNlcjpwYXNz", "not a Bearer"),
    "empty bearer": ("Bearer ", "not a Bearer"),
    "malformed": ("Bearer not.a.jwt", "malformed"),
    "expired": (_bearer(MINTER.sign(_claims(iat=NOW - 7200, nbf=NOW - 7200, exp=NOW - 3600))), "expired"),
    "not yet valid": (_bearer(MINTER.sign(_claims(nbf=NOW + 3600, exp=NOW + 7200))), "not valid yet"),
    "wrong audience": (_bearer(MINTER.sign(_claims(aud="api://someone-else"))), "audience"),
    "wrong issuer": (
        _bearer(MINTER.sign(_claims(iss="https://login.microsoftonline.com/other/v2.0"))),
        "issuer",
    ),
    "unknown kid": (_bearer(MINTER.sign(_claims(), kid="not-a-published-kid")), "does not publish"),
    "other key, same kid": (
        _bearer(TokenMinter(SigningKey.generate(), BASE).sign(_claims(), kid=KEY.kid)),
        "signature",
    ),
    "alg none": (_bearer(_alg_none()), "algorithm"),
    "hs256 with the public key": (_bearer(_forged_hs256()), "algorithm"),
    "no exp": (_bearer(MINTER.sign(_claims(exp=None))), "MissingRequiredClaimError"),
    "no caller": (_bearer(MINTER.sign(_claims(oid=None, azp=None))), "names no caller"),
    "roles not a list": (_bearer(MINTER.sign(_claims(roles="Documents.Submit"))), "roles"),
}


@pytest.mark.parametrize(("authorization", "reason"), BAD_TOKENS.values(), ids=BAD_TOKENS.keys())
def test_every_bad_token_is_unauthenticated_for_its_own_reason(
    authorization: str | None, reason: str
) -> None:
    """Each forgery fails the check it targets (the reason goes to the log; the caller sees one 401)."""
    with pytest.raises(Unauthenticated, match=reason):
        authenticate(authorization, RULES, Keys(KEY))


def test_small_clock_skew_is_tolerated() -> None:
    """A token issued by a clock 30 s ahead is accepted (leeway 60 s); Entra's clocks are not ours."""
    token = MINTER.sign(_claims(iat=NOW + 30, nbf=NOW + 30))
    assert authenticate(_bearer(token), RULES, Keys(KEY)).object_id == PRODUCER.object_id


def test_the_client_id_audience_is_accepted_too() -> None:
    """v2.0 tokens carry the client id as aud; the rules accept either configured audience."""
    rules = TokenRules(
        RULES.issuer, (MINTER.audience, "5e7f0000-0000-4000-8000-0000000000aa"), RULES.jwks_uri
    )
    token = MINTER.sign(_claims(aud="5e7f0000-0000-4000-8000-0000000000aa"))
    assert authenticate(_bearer(token), rules, Keys(KEY)).app_id == PRODUCER.app_id


def test_rules_come_from_settings_and_name_the_missing_one() -> None:
    env = {
        "CLAIMCHECK_AUTH_ISSUER": MINTER.issuer,
        "CLAIMCHECK_AUTH_AUDIENCES": "api://x, 1234",
        "CLAIMCHECK_AUTH_JWKS_URI": f"{BASE}/keys",
    }
    assert TokenRules.from_env(env).audiences == ("api://x", "1234")
    with pytest.raises(SettingsError, match="CLAIMCHECK_AUTH_JWKS_URI"):
        TokenRules.from_env({**env, "CLAIMCHECK_AUTH_JWKS_URI": ""})
    with pytest.raises(SettingsError, match="CLAIMCHECK_AUTH_LEEWAY_SECONDS"):
        TokenRules.from_env({**env, "CLAIMCHECK_AUTH_LEEWAY_SECONDS": "3600"})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_cached_keys_refresh_on_an_unknown_kid_at_a_bounded_rate() -> None:
    """A rolled key is picked up by a refresh; random kids cannot make it fetch more than once a minute."""
    old, new = SigningKey.generate(), SigningKey.generate()
    published = [old]
    clock = Clock()
    keys = CachedSigningKeys(
        lambda: {"keys": [key.public_jwk() for key in published]}, min_refresh_interval=60, clock=clock
    )
    assert keys.key_for(old.kid) is not None
    assert keys.fetches == 1
    for attempt in range(50):
        assert keys.key_for(f"random-{attempt}") is None
    assert keys.fetches == 1
    published.append(new)
    assert keys.key_for(new.kid) is None  # within the interval: not fetched again
    clock.now += 61
    assert keys.key_for(new.kid) is not None
    assert keys.fetches == 2
    token = TokenMinter(new, BASE).token(PRODUCER)
    assert authenticate(_bearer(token), RULES, keys).object_id == PRODUCER.object_id


def test_cached_keys_survive_a_failed_refresh_and_fail_closed_without_keys() -> None:
    key = SigningKey.generate()
    answers: list[Any] = [{"keys": [key.public_jwk()]}, OSError("issuer down")]
    clock = Clock()

    def fetch() -> dict[str, Any]:
        answer = answers.pop(0) if answers else OSError("issuer down")
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)

    keys = CachedSigningKeys(fetch, min_refresh_interval=60, clock=clock)
    assert keys.key_for(key.kid) is not None
    clock.now += 61
    assert keys.key_for("unknown") is None
    assert keys.key_for(key.kid) is not None  # still served from the cache
    down = CachedSigningKeys(fetch, min_refresh_interval=60, clock=clock)
    for _ in range(20):  # an issuer that is down is asked once a minute, not once per request
        with pytest.raises(KeysUnavailable):
            down.key_for(key.kid)
    assert down.fetches == 1


def test_pyjwt_refuses_the_public_key_as_an_hmac_secret() -> None:
    """Belt and braces: even asked for HS256, PyJWT will not take a PEM public key as a secret."""
    with pytest.raises(jwt.InvalidKeyError):
        jwt.decode(_forged_hs256(), KEY.public_pem(), algorithms=["HS256"])


def test_the_jwks_uri_must_be_https_or_loopback() -> None:
    """A plain-HTTP key source off this machine is a refused setting (a 503 naming it), never used."""
    with pytest.raises(SettingsError, match="CLAIMCHECK_AUTH_JWKS_URI"):
        jwks_fetcher("http://login.example.net/common/discovery/v2.0/keys")
    assert callable(jwks_fetcher("https://login.microsoftonline.com/t/discovery/v2.0/keys"))
    assert callable(jwks_fetcher("http://127.0.0.1:7090/t/discovery/v2.0/keys"))


@pytest.mark.parametrize(
    "user_claims", [{"scp": "Documents.ReadWrite"}, {"idtyp": "user"}], ids=["scp", "idtyp user"]
)
def test_a_user_signed_in_through_a_granted_app_is_that_user_not_the_app(user_claims: dict[str, str]) -> None:
    """An access-table grant that names an app by its client id covers that app's own (app-only)
    tokens. A user's delegated token through the same app carries the app's id in azp, and must get
    the user's grants only: otherwise anyone who may sign in to the app holds the app's tenants."""
    user = "00000000-0000-4000-8000-0000000000aa"
    table = AccessTable.parse(
        json.dumps([{"name": "intake-app", "principal": PRODUCER.app_id, "tenants": ["acme"]}])
    )
    app_only = authenticate(_bearer(MINTER.sign(_claims(idtyp="app"))), RULES, Keys(KEY))
    delegated = authenticate(
        _bearer(MINTER.sign(_claims(oid=user, sub=user, **user_claims))), RULES, Keys(KEY)
    )

    assert (app_only.delegated, delegated.delegated) == (False, True)
    assert delegated.app_id == PRODUCER.app_id  # still the client the user signed in with
    assert PRODUCER.app_id in app_only.principal_ids
    assert delegated.principal_ids == (user,)
    assert table.may_see_tenant(app_only, "acme")
    assert not table.may_see_tenant(delegated, "acme")
    with pytest.raises(AccessForbidden):
        table.check(delegated, tenant_id="acme", purpose="contract-review", classification="internal")
    # A grant naming the user by its own object id still admits that user through the app.
    by_user = AccessTable.parse(json.dumps([{"name": "reviewer", "principal": user, "tenants": ["acme"]}]))
    assert by_user.may_see_tenant(delegated, "acme")
