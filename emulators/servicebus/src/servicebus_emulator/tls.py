"""The management plane's TLS certificate: self-signed, generated at each start.

The SDKs' administration clients always speak HTTPS (Python builds ``https://{endpoint}``, and so
does JavaScript), even for a ``UseDevelopmentEmulator=true`` connection string. The emulator
therefore answers TLS on its management port, with a certificate it makes at start for the names a
client uses on this machine (``localhost``, ``127.0.0.1``, ``::1`` and the listening host). Clients
trust that one file: Python ``connection_verify=<path>`` or ``REQUESTS_CA_BUNDLE``/``SSL_CERT_FILE``,
Node ``NODE_EXTRA_CA_CERTS``. It is its own CA (a development certificate signing only itself).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CERTIFICATE_FILE = "management-cert.pem"
KEY_FILE = "management-key.pem"
VALID_DAYS = 30


@dataclass(frozen=True)
class Certificate:
    """The PEM files of one generated certificate and its private key."""

    certificate_path: Path
    key_path: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.certificate_path, self.key_path)
        return context


def _names(host: str) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    addresses = {"127.0.0.1", "::1"}
    try:
        if not ipaddress.ip_address(host).is_unspecified:
            addresses.add(host)
    except ValueError:
        if host.lower() != "localhost":
            names.append(x509.DNSName(host))
    names += [x509.IPAddress(ipaddress.ip_address(address)) for address in sorted(addresses)]
    return names


def generate_certificate(directory: Path, host: str = "127.0.0.1") -> Certificate:
    """Write a fresh self-signed certificate and key (P-256, 30 days) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "servicebus-emulator management")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # tolerate a client's clock skew
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(_names(host)), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    files = Certificate(directory / CERTIFICATE_FILE, directory / KEY_FILE)
    # The key is written owner-only before it holds anything.
    descriptor = os.open(files.key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    files.certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return files
