"""The emulator's TLS: a certificate authority and a serving certificate made per emulator.

A real API server is HTTPS with its CA in the kubeconfig (``certificate-authority-data``), and
clients rely on that: client-go (so kubectl) only sends a bearer token over TLS, which is why
kubectl against a plain-HTTP server answers "You must be logged in to the server".  Each
emulator therefore makes its own CA (an EC P-256 key, never written anywhere but the
emulator's private directory) and a serving certificate it signs for ``localhost``,
``127.0.0.1`` and ``::1``.  Nothing is trusted system-wide: only a client given this CA
(through the kubeconfig the emulator writes, or the backend's ``ca_cert`` option) accepts it.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "the Kubernetes emulator serves HTTPS with certificates made by cryptography: "
        "pip install ./emulators (sandbox-runtime-emulators, from a checkout of this repository)"
    ) from exc

__all__ = ["ServingCertificates", "make_certificates"]

#: Long enough for any emulator session, short enough that a leaked file soon means nothing.
_VALIDITY = datetime.timedelta(days=30)
_HOSTS = ("localhost",)
_ADDRESSES = ("127.0.0.1", "::1")


@dataclass(frozen=True)
class ServingCertificates:
    """PEM files of one emulator's CA and serving certificate, and the context that serves them."""

    ca_pem: bytes
    ca_file: Path
    cert_file: Path
    key_file: Path

    def server_context(self) -> ssl.SSLContext:
        """A server-side context with the serving certificate, TLS 1.2 and newer."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        # HTTP/1.1 only: client-go offers h2 first and would otherwise need HTTP/2 here.
        context.set_alpn_protocols(["http/1.1"])
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sandbox-runtime emulator"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes) -> Path:
    path.touch(mode=0o600)
    path.write_bytes(data)
    return path


def make_certificates(directory: Path) -> ServingCertificates:
    """Make a fresh CA and a serving certificate signed by it, as PEM files in ``directory``."""
    now = datetime.datetime.now(datetime.timezone.utc)
    not_before = now - datetime.timedelta(minutes=5)  # tolerate a little clock skew
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("sandbox-runtime-emulator-ca")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    alternative_names: list[x509.GeneralName] = [x509.DNSName(host) for host in _HOSTS]
    alternative_names += [x509.IPAddress(ipaddress.ip_address(a)) for a in _ADDRESSES]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("kube-apiserver"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alternative_names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    return ServingCertificates(
        ca_pem=ca_pem,
        ca_file=_write(directory / "ca.crt", ca_pem),
        cert_file=_write(
            directory / "apiserver.crt", cert.public_bytes(serialization.Encoding.PEM)
        ),
        key_file=_write(directory / "apiserver.key", _private_pem(key)),
    )
