"""A self-signed TLS certificate for ``127.0.0.1``/``localhost``, generated at start with ``cryptography``.

Used when the engine serves HTTPS (the ``connection_per_request`` fault): the engine presents the
certificate, the LLM client trusts it as its only CA, so every new connection does a real TLS handshake.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True, slots=True)
class CertificateFiles:
    """PEM files: ``certfile`` (also the CA bundle clients trust) and ``keyfile`` (unencrypted)."""

    certfile: Path
    keyfile: Path


def generate_self_signed(directory: Path, *, valid_days: int = 2) -> CertificateFiles:
    """Write a fresh P-256 key and a self-signed certificate for ``127.0.0.1`` and ``localhost`` into
    ``directory`` (created if missing) and return their paths. Valid from one hour ago for ``valid_days``."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hotspan-instrumented-stack")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=valid_days))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    files = CertificateFiles(directory / "engine-cert.pem", directory / "engine-key.pem")
    files.certfile.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    files.keyfile.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    files.keyfile.chmod(0o600)
    return files
