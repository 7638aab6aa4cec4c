"""Optional customer-managed keys under mocks: both settings or neither, the payload account (and a
Premium namespace) encrypted with the named Key Vault key through the named identity."""

from __future__ import annotations

from typing import Any

import pytest

from infra.program import deploy
from infra.stack_config import StackConfigError, load_settings, read_stack_config
from tests.infra.pulumi_harness import ProgramRun, run_program
from tests.infra.stacks import host_account, stack_run

VAULT = "https://cc-keys-prod.vault.azure.net"
KEY_URI = f"{VAULT}/keys/payloads"
IDENTITY = (
    "/subscriptions/00000000-1111-2222-3333-444444444444/resourceGroups/rg-keys/providers/"
    "Microsoft.ManagedIdentity/userAssignedIdentities/cc-cmk"
)
CMK = {"customerManagedKeyUri": KEY_URI, "customerManagedKeyIdentity": IDENTITY}


def _payload_account(run: ProgramRun) -> dict[str, Any]:
    return next(a for a in run.of_type("StorageAccount") if a.name.startswith("ccpay")).inputs


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ({"customerManagedKeyUri": KEY_URI}, "claimcheck:customerManagedKeyIdentity is missing"),
        ({"customerManagedKeyIdentity": IDENTITY}, "claimcheck:customerManagedKeyUri is missing"),
        (
            CMK | {"customerManagedKeyUri": "https://evil.example.com/keys/k"},
            "claimcheck:customerManagedKeyUri:",
        ),
        (CMK | {"customerManagedKeyIdentity": "cc-cmk"}, "claimcheck:customerManagedKeyIdentity:"),
    ],
)
def test_half_set_or_malformed_keys_are_refused_naming_the_key(given: dict[str, str], missing: str) -> None:
    with pytest.raises(StackConfigError) as refused:
        load_settings(read_stack_config("prod") | given, "prod")
    assert str(refused.value).startswith(missing)


def test_the_shipped_stacks_keep_microsoft_managed_keys() -> None:
    for stack in ("dev", "prod"):
        settings, run = stack_run(stack)
        assert settings.customer_managed_key is None
        encryption = _payload_account(run)["encryption"]
        assert encryption["keySource"] == "Microsoft.Storage"
        assert "keyVaultProperties" not in encryption
        assert "encryption" not in run.one("Namespace").inputs


def test_prod_with_a_key_encrypts_payloads_and_the_premium_namespace_with_it() -> None:
    settings = load_settings(read_stack_config("prod") | CMK, "prod")
    run = run_program(lambda: deploy(settings), stack="prod")
    payloads = _payload_account(run)
    assert payloads["identity"] == {"type": "UserAssigned", "userAssignedIdentities": [IDENTITY]}
    encryption = payloads["encryption"]
    assert encryption["keySource"] == "Microsoft.Keyvault"
    assert encryption["keyVaultProperties"] == {"keyVaultUri": VAULT, "keyName": "payloads"}  # no version
    assert encryption["encryptionIdentity"] == {"encryptionUserAssignedIdentity": IDENTITY}
    assert encryption["requireInfrastructureEncryption"] is True
    assert host_account(run).inputs["encryption"]["keySource"] == "Microsoft.Storage"
    namespace = run.one("Namespace").inputs
    assert namespace["identity"] == {"type": "UserAssigned", "userAssignedIdentities": [IDENTITY]}
    (vault_key,) = namespace["encryption"]["keyVaultProperties"]
    assert namespace["encryption"]["keySource"] == "Microsoft.KeyVault"
    assert vault_key == {
        "keyVaultUri": VAULT,
        "keyName": "payloads",
        "identity": {"userAssignedIdentity": IDENTITY},
    }


def test_a_standard_namespace_keeps_microsofts_key_and_a_version_pins_the_key() -> None:
    version = "0123456789abcdef0123456789abcdef"
    config = read_stack_config("dev") | CMK | {"customerManagedKeyUri": f"{KEY_URI}/{version}"}
    run = run_program(lambda: deploy(load_settings(config, "dev")), stack="dev")
    assert _payload_account(run)["encryption"]["keyVaultProperties"]["keyVersion"] == version
    assert "encryption" not in run.one("Namespace").inputs
