"""The direct upload's user-delegation grant path, as on Azure with the app's managed identity, against
Azurite over HTTPS with OAuth (local/azurite_tls.py): the staging adapter holds a token credential (no
account key), so its grant is a user delegation SAS signed with the key Get User Delegation Key returned
for that identity; Azurite checks that SAS like Azure does (the key derived from the identity's object and
tenant ids, the signed fields, the permission), and the app reads the staged bytes back with its token."""

from __future__ import annotations

import io
import logging
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError
from azure.storage.blob import BlobServiceClient
from claimcheck.adapters.staging import AzureBlobStagingArea
from claimcheck.blob_upload import UploadFailed, put_blocks
from claimcheck.integrity import read_up_to
from claimcheck.uploads import STAGING_PREFIX

from local.azurite import Azurite, start_azurite
from local.azurite_tls import ENTRA_ISSUER_BASE, STORAGE_AUDIENCE, TlsFiles, write_self_signed_certificate
from local.identity.identities import LocalIdentity
from local.identity.keys import SigningKey, TokenMinter

BODY = b"0123456789" * 30_000  # 300 KB in 64 KiB blocks
# The stand-in for the Function App's managed identity: Azure Storage sees its object id and tenant.
APP = LocalIdentity(
    "local-function-app",
    "0b1ec7a1-0000-4000-8000-0000000000fa",
    "a99a0000-0000-4000-8000-0000000000fa",
    (),
    (),
)
STORAGE_SCOPE = f"{STORAGE_AUDIENCE}/.default"


class MintedCredential:
    """A TokenCredential as DefaultAzureCredential is to the SDK: tokens for the scope it asks, here
    minted by the local issuer's code with an Entra ID issuer and the Storage audience."""

    def __init__(self, minter: TokenMinter) -> None:
        self.minter = minter
        self.scopes: list[str] = []

    def get_token(self, *scopes: str, **_: Any) -> AccessToken:
        self.scopes.extend(scopes)
        return AccessToken(self.minter.token(APP), int(time.time()) + 3600)


@pytest.fixture(scope="module")
def oauth_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Azurite, TlsFiles]]:
    folder = tmp_path_factory.mktemp("azurite-oauth")
    tls = write_self_signed_certificate(folder / "tls")
    with start_azurite(folder / "data", tls=tls) as azurite:
        _wait_for_https(azurite, tls)
        yield azurite, tls


def _wait_for_https(azurite: Azurite, tls: TlsFiles, timeout: float = 60.0) -> None:
    """Until Azurite answers over TLS (any HTTP status), so that a TLS start-up problem fails here with its
    cause instead of in the SDK's retries (one early run spent 90 s there, cause not kept)."""
    context = ssl.create_default_context(cafile=str(tls.certificate))
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(f"{azurite.blob_endpoint}?comp=list", timeout=10, context=context)  # noqa: S310
            return
        except urllib.error.HTTPError:
            return  # an answer (403: no credential)
        except OSError as error:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"Azurite did not answer over HTTPS within {timeout} s: {error}"
                ) from None
            time.sleep(0.2)


@pytest.fixture
def delegated(
    oauth_azurite: tuple[Azurite, TlsFiles], monkeypatch: pytest.MonkeyPatch
) -> tuple[AzureBlobStagingArea, MintedCredential]:
    azurite, tls = oauth_azurite
    # put_blocks (urllib, as a client would) trusts the throwaway certificate through the default context.
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.certificate))
    credential = MintedCredential(TokenMinter(SigningKey.generate(), ENTRA_ISSUER_BASE, STORAGE_AUDIENCE))
    service = BlobServiceClient(
        azurite.blob_endpoint,
        credential=credential,
        connection_verify=str(tls.certificate),
        max_chunk_get_size=64 * 1024,
    )
    container = service.get_container_client(f"staging-{uuid.uuid4().hex[:12]}")
    container.create_container()
    return AzureBlobStagingArea(service, container), credential


def _query(url: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


def test_a_user_delegation_grant_writes_its_blob_and_the_app_reads_it_back(
    delegated: tuple[AzureBlobStagingArea, MintedCredential],
) -> None:
    staging, credential = delegated
    name = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    url = staging.grant_write(name, expires_at=datetime.now(UTC) + timedelta(minutes=5))
    signed = _query(url)
    # Signed with the delegation key of the app's identity, not an account key; write only, HTTPS only.
    assert (signed["skoid"], signed["sktid"], signed["sks"]) == (
        APP.object_id,
        credential.minter.directory_tenant,
        "b",
    )
    assert (signed["sp"], signed["spr"], signed["sr"]) == ("w", "https", "b")
    assert set(credential.scopes) == {STORAGE_SCOPE}
    assert put_blocks(url, io.BytesIO(BODY), block_bytes=64 * 1024, timeout=30)[0] == len(BODY)
    found = staging.properties(name)
    assert found is not None
    assert found.length == len(BODY)
    assert read_up_to(staging.open(name, etag=found.etag), len(BODY) + 1) == BODY


def test_azurite_checks_the_delegation_signature_and_the_permission(
    delegated: tuple[AzureBlobStagingArea, MintedCredential],
) -> None:
    """Negative controls: the same grant claiming another object id fails (the key derives from it),
    and a write-only grant cannot read."""
    staging, _ = delegated
    name = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    url = staging.grant_write(name, expires_at=datetime.now(UTC) + timedelta(minutes=5))
    forged = url.replace(f"skoid={APP.object_id}", f"skoid={uuid.uuid4()}")
    assert forged != url
    with pytest.raises(UploadFailed) as refused:
        put_blocks(forged, io.BytesIO(b"abc"), block_bytes=3, timeout=30, attempts=1)
    assert refused.value.status == 403
    put_blocks(url, io.BytesIO(b"abc"), block_bytes=3, timeout=30)
    with pytest.raises(urllib.error.HTTPError) as no_read:
        urllib.request.urlopen(url, timeout=30)  # noqa: S310 - Azurite on loopback
    assert no_read.value.code == 403


def test_a_token_for_another_audience_gets_no_delegation_key(oauth_azurite: tuple[Azurite, TlsFiles]) -> None:
    """Azurite's basic OAuth does check the token's audience: the key is not handed to just anyone."""
    azurite, tls = oauth_azurite
    wrong = MintedCredential(TokenMinter(SigningKey.generate(), ENTRA_ISSUER_BASE, "api://claimcheck-local"))
    service = BlobServiceClient(
        azurite.blob_endpoint, credential=wrong, connection_verify=str(tls.certificate)
    )
    now = datetime.now(UTC)
    with pytest.raises(ClientAuthenticationError):
        service.get_user_delegation_key(now, now + timedelta(minutes=5))


def test_the_certificate_is_only_for_loopback(tmp_path: Path) -> None:
    from cryptography import x509

    tls = write_self_signed_certificate(tmp_path)
    certificate = x509.load_pem_x509_certificate(tls.certificate.read_bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1"}
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert tls.private_key.stat().st_mode & 0o077 == 0


def test_a_grant_while_storage_is_down_is_an_outage_the_grant_route_answers_503(tmp_path: Path) -> None:
    """On Azure the grant asks storage for the user delegation key; with the account unreachable that
    request fails, and what leaves the adapter is an outage (``is_unavailable``: the grant route answers
    it 503 unavailable with Retry-After), naming neither the URL nor a key."""
    from claimcheck.errors import StorageUnavailable
    from claimcheck.http_api import Unavailable
    from claimcheck.policy import DEFAULT_PURPOSES
    from claimcheck.resilience import is_unavailable
    from claimcheck.uploads import DirectUploads

    tls = write_self_signed_certificate(tmp_path / "tls")
    with start_azurite(tmp_path / "data", tls=tls) as azurite:
        _wait_for_https(azurite, tls)
        credential = MintedCredential(TokenMinter(SigningKey.generate(), ENTRA_ISSUER_BASE, STORAGE_AUDIENCE))
        service = BlobServiceClient(
            azurite.blob_endpoint, credential=credential, connection_verify=str(tls.certificate)
        )
        container = service.get_container_client("staging")
        container.create_container()
        uploads = DirectUploads(
            AzureBlobStagingArea(service, container),
            purposes=DEFAULT_PURPOSES,
            max_bytes=10**6,
            orphan_grace=timedelta(hours=1),
            clock=lambda: datetime.now(UTC),
        )
        azurite.stop(flush=False)
        with pytest.raises(StorageUnavailable) as down:
            uploads.grant(scope="tenant/app", tenant_id="acme")
    assert is_unavailable(down.value)
    assert Unavailable.answer("upload grant", down.value, logging.getLogger("test")) is not None
    assert "127.0.0.1" not in str(down.value)
    assert "https" not in str(down.value)
