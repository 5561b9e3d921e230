"""Throwaway certificates and stores for tests of TLS deployments (zkpy's and users' own).

``make_pki(dir)`` writes a CA, a server certificate for ``127.0.0.1``/``localhost`` and client
certificates, each as a PEM file (key and chain together, as ZooKeeper's PEM key stores hold them),
a PKCS#12 store and a JKS store (pyjks), plus the CA as PEM/PKCS#12/JKS trust stores, and an
untrusted (self-signed) and an expired client certificate for the refusal cases.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import jks  # type: ignore[import-untyped]
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PASSWORD = "changeit"


@dataclass(frozen=True)
class Identity:
    """One key and certificate in every store format."""

    pem: Path  # key + certificate chain
    cert_pem: Path  # certificate only
    key_pem: Path  # key only (unencrypted: for clients such as kazoo)
    p12: Path
    jks: Path
    subject: str  # as Java's RFC 2253 form writes it


@dataclass(frozen=True)
class Pki:
    ca_pem: Path
    ca_p12: Path
    ca_jks: Path
    server: Identity
    client: Identity
    other_client: Identity
    untrusted_client: Identity  # self-signed: no CA vouches for it
    expired_client: Identity


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "zkpy")]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _cert(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
          issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool = False, server: bool = False,
          expired: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    start, end = (now - datetime.timedelta(days=10), now - datetime.timedelta(days=1)) if expired else \
        (now - datetime.timedelta(hours=1), now + datetime.timedelta(days=2))
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server else \
            [ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_identity(d: Path, name: str, key: ec.EllipticCurvePrivateKey, chain: list[x509.Certificate]) -> Identity:
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    pem_chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    (d / f"{name}.pem").write_bytes(pem_key + pem_chain)
    (d / f"{name}-cert.pem").write_bytes(pem_chain)
    (d / f"{name}-key.pem").write_bytes(pem_key)
    (d / f"{name}.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        name.encode(), key, chain[0], chain[1:] or None, serialization.BestAvailableEncryption(PASSWORD.encode())))
    der_key = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    entry = jks.PrivateKeyEntry.new(name, [c.public_bytes(serialization.Encoding.DER) for c in chain], der_key, "pkcs8")
    jks.KeyStore.new("jks", [entry]).save(str(d / f"{name}.jks"), PASSWORD)
    subject = chain[0].subject.rfc4514_string()
    return Identity(d / f"{name}.pem", d / f"{name}-cert.pem", d / f"{name}-key.pem", d / f"{name}.p12",
                    d / f"{name}.jks", subject)


def make_pki(d: Path) -> Pki:
    d.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("zkpy test CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    (d / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (d / "ca.p12").write_bytes(pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(ca, b"ca")], serialization.BestAvailableEncryption(PASSWORD.encode())))
    trusted = jks.TrustedCertEntry.new("ca", ca.public_bytes(serialization.Encoding.DER))
    jks.KeyStore.new("jks", [trusted]).save(str(d / "ca.jks"), PASSWORD)

    def issued(name: str, cn: str, ou: str | None = None, **kw: bool) -> Identity:
        key = ec.generate_private_key(ec.SECP256R1())
        return _write_identity(d, name, key, [_cert(_name(cn, ou), key, ca_name, ca_key, **kw), ca])

    rogue_key = ec.generate_private_key(ec.SECP256R1())
    rogue = _cert(_name("rogue"), rogue_key, _name("rogue"), rogue_key)
    return Pki(d / "ca.pem", d / "ca.p12", d / "ca.jks",
               server=issued("server", "localhost", "servers", server=True),
               client=issued("client", "alice", "clients"),
               other_client=issued("other", "bob", "clients"),
               untrusted_client=_write_identity(d, "untrusted", rogue_key, [rogue]),
               expired_client=issued("expired", "carol", "clients", expired=True))
