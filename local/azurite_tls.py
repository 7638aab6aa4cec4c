"""HTTPS with OAuth for Azurite: a self-signed certificate for 127.0.0.1, made at start.

Azurite accepts bearer tokens only over HTTPS (``--oauth basic`` needs ``--cert``/``--key``), and Get User
Delegation Key only with a bearer token, so the user-delegation grant path of the direct upload (what the
app's managed identity does on Azure) can run locally only against an Azurite started this way. In
``basic`` mode Azurite checks a token's shape, lifetime, issuer (an Entra ID one, e.g.
``https://sts.windows.net/<tenant>/``) and audience (``https://storage.azure.com``), not its signature
(Azurite's README, "OAuth Configuration"; src/blob/authentication/BlobTokenAuthenticator.ts).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

# What Azurite's basic OAuth accepts: an Entra ID v1 issuer prefix and the Storage audience.
ENTRA_ISSUER_BASE = "https://sts.windows.net"
STORAGE_AUDIENCE = "https://storage.azure.com"


@dataclass(frozen=True)
class TlsFiles:
    certificate: Path  # PEM; also what a client trusts (it is its own issuer)
    private_key: Path  # PEM, unencrypted (a throwaway key for loopback only)


def write_self_signed_certificate(folder: Path, *, days: int = 2) -> TlsFiles:
    """A fresh RSA key and a certificate for 127.0.0.1 and localhost, valid ``days``, in ``folder``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    files = TlsFiles(folder / "azurite-cert.pem", folder / "azurite-key.pem")
    files.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    files.private_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    files.private_key.chmod(0o600)
    return files
