"""Certificates made in the test: a CA of its own and a server certificate it signs, as PEM files (for an HTTPS
test server, or a broker's ``--cert/--key``). Nothing is fetched; ``cryptography`` is a test dependency."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA certificate a client trusts
    cert: Path  # the server's certificate (signed by the CA) ...
    key: Path  # ... and its private key (unencrypted PEM)
    client_cert: Path | None = None  # a client's certificate (signed by the CA), for mutual TLS ...
    client_key: Path | None = None  # ... and its private key, encrypted with the password given


def make_certs(folder: Path, names: list[str], client_key_password: bytes | None = None) -> Certs:
    """A CA and a server certificate for ``names`` (DNS names, or IP addresses as text), valid for a day; with
    ``client_key_password``, also a client certificate whose key is encrypted with it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lastmile test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    alt = [_alt_name(n) for n in names]
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    out = Certs(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    out.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem = serialization.PrivateFormat.TraditionalOpenSSL
    out.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, pem, serialization.NoEncryption()))
    if client_key_password is None:
        return out
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lastmile-gw")]))
        .issuer_name(ca_name).public_key(client_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    out = Certs(out.ca, out.cert, out.key, folder / "client.pem", folder / "client.key")
    out.client_cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))
    encrypted = serialization.BestAvailableEncryption(client_key_password)
    out.client_key.write_bytes(
        client_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encrypted)
    )
    return out


def _alt_name(name: str):
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)
