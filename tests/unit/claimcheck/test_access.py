"""The typed access table (claimcheck.access): grants, tenant prefixes, refusals, settings errors."""

from __future__ import annotations

import json

import pytest
from claimcheck.access import AccessForbidden, AccessTable
from claimcheck.auth import Caller
from claimcheck.settings import SettingsError

TABLE = AccessTable.parse(
    json.dumps(
        [
            {
                "name": "acme-intake",
                "principal": "oid-acme",
                "tenants": ["acme"],
                "purposes": ["contract-review"],
            },
            {"name": "tests", "principal": "app-tests", "tenants": ["t-*"], "classifications": ["internal"]},
        ]
    )
)
ACME = Caller(object_id="oid-acme", app_id="app-acme", directory_tenant="d", roles=frozenset())
TESTS = Caller(object_id="oid-other", app_id="app-tests", directory_tenant="d", roles=frozenset())
NOBODY = Caller(object_id="oid-nobody", app_id="app-nobody", directory_tenant="d", roles=frozenset())


def test_a_grant_covers_its_tenants_purposes_and_classifications() -> None:
    TABLE.check(ACME, tenant_id="acme", purpose="contract-review", classification="restricted")
    TABLE.check(TESTS, tenant_id="t-123", purpose="bulk-ingest", classification="internal")
    assert TABLE.may_see_tenant(TESTS, "t-anything")
    assert not TABLE.may_see_tenant(TESTS, "acme")


@pytest.mark.parametrize(
    ("caller", "tenant", "purpose", "classification"),
    [
        (ACME, "globex", "contract-review", "internal"),  # a tenant that exists elsewhere
        (ACME, "no-such-tenant", "contract-review", "internal"),  # one that exists nowhere
        (ACME, "acme", "bulk-ingest", "internal"),  # a purpose not granted
        (TESTS, "t-1", "contract-review", "confidential"),  # a classification not granted
        (TESTS, "t-1' or PartitionKey ne '", "contract-review", "internal"),  # OData metacharacters
        (TESTS, "t-1/../acme", "contract-review", "internal"),
        (NOBODY, "acme", "contract-review", "internal"),  # a caller without any grant
    ],
)
def test_every_refusal_reads_the_same(caller: Caller, tenant: str, purpose: str, classification: str) -> None:
    with pytest.raises(AccessForbidden) as refused:
        TABLE.check(caller, tenant_id=tenant, purpose=purpose, classification=classification)
    assert str(refused.value) == "this caller may not use that tenant, purpose or classification"
    assert tenant not in str(refused.value)


def test_the_read_scope_is_the_callers_tenants_and_a_stated_tenant_only_narrows_it() -> None:
    wide = TABLE.read_scope(TESTS, None)
    assert [wide(tenant) for tenant in ("t-1", "t-2", "acme")] == [True, True, False]
    narrowed = TABLE.read_scope(TESTS, "t-1")
    assert [narrowed(tenant) for tenant in ("t-1", "t-2", "acme")] == [True, False, False]


@pytest.mark.parametrize(
    ("caller", "stated"),
    [
        (TESTS, "acme"),  # another caller's tenant: stating it never widens
        (ACME, "t-1"),
        (TESTS, "no-such-tenant"),
        (TESTS, ""),  # an empty header states a tenant too: it selects nothing
        (TESTS, "t-*"),  # a grant's pattern is not a tenant id
        (TESTS, "t-1' or PartitionKey ne '"),
        (NOBODY, "acme"),
    ],
)
def test_a_stated_tenant_not_granted_selects_nothing(caller: Caller, stated: str) -> None:
    visible = TABLE.read_scope(caller, stated)
    assert not any(visible(tenant) for tenant in (stated, "acme", "t-1", "t-*", "globex"))


def test_an_absent_table_grants_nothing() -> None:
    assert AccessTable.from_env({}).grants == ()
    assert not AccessTable.from_env({}).may_see_tenant(ACME, "acme")


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ({"principal": "p", "tenants": ["a"]}, "name and principal"),
        ({"name": "n", "role": "", "tenants": ["a"]}, "name and role"),
        ({"name": "n", "principal": "p", "tenants": []}, "tenants"),
        ({"name": "n", "principal": "p", "tenants": ["*"]}, "tenants"),
        ({"name": "n", "principal": "p", "tenants": ["a'b"]}, "tenants"),
        ({"name": "n", "principal": "p", "tenants": ["a"], "classifications": ["secret"]}, "classifications"),
        ({"name": "n", "principal": "p", "tenants": ["a"], "oid": "x"}, "unknown keys"),
        ({"name": "n", "principal": "p", "tenants": ["a"], "role": "x"}, "exactly one of principal"),
        ({"name": "n", "tenants": ["a"]}, "exactly one of principal"),
    ],
)
def test_a_malformed_table_is_refused_naming_the_entry(entry: dict[str, object], named: str) -> None:
    with pytest.raises(SettingsError, match=rf"CLAIMCHECK_ACCESS_TABLE\[0\].*{named}"):
        AccessTable.parse(json.dumps([entry]))


def test_the_table_round_trips_through_its_setting() -> None:
    assert AccessTable.parse(TABLE.to_json()) == TABLE


def test_the_example_local_settings_match_the_local_issuer_and_identities() -> None:
    """functions/local.settings.example.json (for running the host by hand next to `python -m
    local.stack`) holds what local/stack.py writes: the issuer on its default port and the access table."""
    from local.identity import LOCAL_AUDIENCE, issuer_url, local_access_table, local_consumer_settings
    from local.identity.keys import jwks_url
    from local.stack import REPO_ROOT

    example = json.loads((REPO_ROOT / "functions" / "local.settings.example.json").read_text())["Values"]
    base = "http://127.0.0.1:7090"
    assert example["CLAIMCHECK_AUTH_ISSUER"] == issuer_url(base)
    assert example["CLAIMCHECK_AUTH_JWKS_URI"] == jwks_url(base)
    assert example["CLAIMCHECK_AUTH_AUDIENCES"] == LOCAL_AUDIENCE
    assert AccessTable.parse(example["CLAIMCHECK_ACCESS_TABLE"]) == local_access_table()
    assert local_consumer_settings().items() <= example.items()


CLAIM_TABLE = AccessTable.parse(
    json.dumps(
        [
            {"name": "reviewers", "group": "group-reviewers", "tenants": ["acme", "globex"]},
            {
                "name": "archivists",
                "role": "Tenants.Archive",
                "tenants": ["archive-*"],
                "purposes": ["evidence-archive"],
            },
        ]
    )
)


def test_a_grant_may_name_its_callers_by_group_or_app_role_claim() -> None:
    """Any caller whose validated token carries the group (or app role) gets the grant; ids do not."""
    member = Caller(
        object_id="oid-x",
        app_id="app-x",
        directory_tenant="d",
        roles=frozenset(),
        groups=frozenset({"group-reviewers"}),
    )
    archivist = Caller(
        object_id="oid-y",
        app_id="app-y",
        directory_tenant="d",
        roles=frozenset({"Documents.Submit", "Tenants.Archive"}),
    )
    CLAIM_TABLE.check(member, tenant_id="globex", purpose="contract-review", classification="restricted")
    CLAIM_TABLE.check(archivist, tenant_id="archive-7", purpose="evidence-archive", classification="internal")
    assert not CLAIM_TABLE.may_see_tenant(member, "archive-7")
    assert not CLAIM_TABLE.may_see_tenant(archivist, "acme")
    # The value in another claim does not count: a group id as a role, a role as an object id.
    impostors = (
        Caller(
            object_id="group-reviewers",
            app_id="group-reviewers",
            directory_tenant="d",
            roles=frozenset({"group-reviewers"}),
        ),
        Caller(
            object_id="Tenants.Archive",
            app_id="a",
            directory_tenant="d",
            roles=frozenset(),
            groups=frozenset({"Tenants.Archive"}),
        ),
    )
    for caller in impostors:
        assert not CLAIM_TABLE.may_see_tenant(caller, "acme")
        assert not CLAIM_TABLE.may_see_tenant(caller, "archive-7")


def test_claim_grants_round_trip_through_the_setting() -> None:
    assert AccessTable.parse(CLAIM_TABLE.to_json()) == CLAIM_TABLE
    assert [sorted(entry) for entry in json.loads(CLAIM_TABLE.to_json())] == [
        ["group", "name", "tenants"],
        ["name", "purposes", "role", "tenants"],
    ]
