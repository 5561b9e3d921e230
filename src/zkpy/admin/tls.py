"""TLS contexts from ZooKeeper's key and trust stores (``ssl.*`` / ``ssl.quorum.*`` keys).

ZooKeeper's deployments keep their keys in PEM files (key and certificate chain in one file),
PKCS#12 or JKS stores; ``cryptography`` reads the first two and ``pyjks`` the third, and the
standard library's ``ssl`` does the TLS. Nothing here is cryptography by hand.

A store that cannot be read (missing file, wrong password, no key, a type that cannot be told)
raises ``TlsConfigError`` naming the key that points to it and the file, so that the server
exits 2 before serving. The private key reaches OpenSSL through a temporary PEM file that is
itself encrypted with a one-time password and removed at once.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from dataclasses import dataclass

import jks  # type: ignore[import-untyped]
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from zkpy.config import StoreConfig, TlsConfig


class TlsConfigError(Exception):
    """A key or trust store or TLS setting that cannot be used; the message names the key and file."""


_EXTENSIONS = {".pem": "PEM", ".crt": "PEM", ".cer": "PEM", ".key": "PEM", ".p12": "PKCS12",
               ".pfx": "PKCS12", ".jks": "JKS"}
_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1.2": ssl.TLSVersion.TLSv1_2,
             "TLSv1.3": ssl.TLSVersion.TLSv1_3, "TLS": ssl.TLSVersion.TLSv1_2}


@dataclass(frozen=True)
class StoreContents:
    """What a store holds: a private key with its chain (key stores), certificates (trust stores)."""

    key: PrivateKeyTypes | None
    chain: list[x509.Certificate]


def store_type(store: StoreConfig, key: str) -> str:
    """The store's type: as configured, or from the file's extension as ZooKeeper infers it."""
    if store.store_type:
        return store.store_type
    ext = os.path.splitext(store.location)[1].lower()
    if ext not in _EXTENSIONS:
        raise TlsConfigError(f"{key}.location={store.location}: cannot tell the store type from the extension "
                             f"{ext or '(none)'}; set {key}.type to PEM, PKCS12 or JKS")
    return _EXTENSIONS[ext]


def load_store(store: StoreConfig, key: str) -> StoreContents:
    """Read a key or trust store; ``key`` is ``ssl.keyStore`` (or trustStore, or the quorum ones)."""
    kind = store_type(store, key)
    where = f"{key}.location={store.location}"
    try:
        with open(store.location, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise TlsConfigError(f"{where}: cannot read: {exc.strerror}") from None
    password = store.password.encode("utf-8") if store.password else None
    try:
        if kind == "PEM":
            return _load_pem(data, password)
        if kind == "PKCS12":
            p12_key, cert, extra = pkcs12.load_key_and_certificates(data, password)
            return StoreContents(p12_key, ([cert] if cert is not None else []) + list(extra))
        return _load_jks(data, store.password or "")
    except (ValueError, TypeError, jks.util.KeystoreException) as exc:
        problem = str(exc).strip() or type(exc).__name__
        if "password" in problem.lower() or "mac" in problem.lower() or "decrypt" in problem.lower():
            problem = f"wrong {key}.password, or a damaged store ({problem})"
        raise TlsConfigError(f"{where} ({kind}): {problem}") from None


def _load_pem(data: bytes, password: bytes | None) -> StoreContents:
    chain = x509.load_pem_x509_certificates(data) if b"-----BEGIN CERTIFICATE" in data else []
    key = None
    if b"PRIVATE KEY-----" in data:
        key = serialization.load_pem_private_key(data, password)
    if key is None and not chain:
        raise ValueError("no certificate and no private key in PEM form")
    return StoreContents(key, chain)


def _load_jks(data: bytes, password: str) -> StoreContents:
    store = jks.KeyStore.loads(data, password)
    for entry in store.private_keys.values():
        if not entry.is_decrypted():
            entry.decrypt(password)
        key = serialization.load_der_private_key(entry.pkey_pkcs8, None)
        return StoreContents(key, [x509.load_der_x509_certificate(der) for _, der in entry.cert_chain])
    return StoreContents(None, [x509.load_der_x509_certificate(e.cert) for e in store.certs.values()])


def _load_chain(ctx: ssl.SSLContext, contents: StoreContents) -> None:
    assert contents.key is not None
    one_time = secrets.token_urlsafe(24).encode("ascii")
    pem = contents.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.BestAvailableEncryption(one_time))
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in contents.chain)
    fd, path = tempfile.mkstemp(prefix="zkpy-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=one_time)
    finally:
        os.unlink(path)


def java_cipher_to_openssl(name: str) -> str:
    """A Java (IANA) TLS 1.2 cipher suite name in OpenSSL's spelling:
    ``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` -> ``ECDHE-RSA-AES128-GCM-SHA256``."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name  # already OpenSSL's spelling, or a TLS 1.3 suite
    kex, cipher = name[4:].split("_WITH_", 1)
    cipher = cipher.replace("AES_128", "AES128").replace("AES_256", "AES256").replace("CHACHA20_POLY1305", "CHACHA20-POLY1305")
    if cipher.endswith("_CBC_SHA"):
        cipher = cipher[: -len("_CBC_SHA")] + "_SHA"
    cipher = cipher.replace("_CBC_", "_")
    parts = [] if kex == "RSA" else kex.split("_")
    return "-".join([*parts, *cipher.split("_")]).replace("CHACHA20-POLY1305-SHA256", "CHACHA20-POLY1305")


def _versions(ctx: ssl.SSLContext, tls: TlsConfig, prefix: str) -> None:
    if tls.enabled_protocols:
        versions = sorted(_VERSIONS[p] for p in tls.enabled_protocols)
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    else:
        ctx.minimum_version = _VERSIONS[tls.protocol]
    if ctx.minimum_version < ssl.TLSVersion.TLSv1_2:
        try:  # OpenSSL's default security level refuses TLS 1.0/1.1; an operator asked for them
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        except ssl.SSLError:
            pass
    if tls.ciphersuites:
        tls12 = [java_cipher_to_openssl(c) for c in tls.ciphersuites if "_WITH_" in c or "-" in c]
        if tls12:
            try:
                ctx.set_ciphers(":".join(tls12))
            except ssl.SSLError:
                raise TlsConfigError(f"{prefix}ciphersuites={','.join(tls.ciphersuites)}: none is a cipher suite "
                                     "OpenSSL knows") from None


def server_context(tls: TlsConfig, prefix: str = "ssl.") -> ssl.SSLContext:
    """The server side of a listener: its key store, the trust store that checks clients, and
    ``clientAuth`` (need: a client without a trusted certificate is refused; want: asked for)."""
    if tls.key_store is None:
        raise TlsConfigError(f"{prefix}keyStore.location is not set")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(ctx, tls, prefix)
    key_store = load_store(tls.key_store, f"{prefix}keyStore")
    if key_store.key is None:
        raise TlsConfigError(f"{prefix}keyStore.location={tls.key_store.location}: the store holds no private key")
    try:
        _load_chain(ctx, key_store)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"{prefix}keyStore.location={tls.key_store.location}: {exc.reason or exc}") from None
    _trust(ctx, tls, prefix, ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = {"need": ssl.CERT_REQUIRED, "want": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}[tls.client_auth]
    return ctx


def client_context(tls: TlsConfig, prefix: str = "ssl.") -> ssl.SSLContext:
    """The client side (a quorum member connecting to a peer, or a test client): its key store if
    any, the trust store that checks the server, and host name verification."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(ctx, tls, prefix)
    if tls.key_store is not None:
        contents = load_store(tls.key_store, f"{prefix}keyStore")
        if contents.key is not None:
            _load_chain(ctx, contents)
    _trust(ctx, tls, prefix, ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = tls.hostname_verification
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _trust(ctx: ssl.SSLContext, tls: TlsConfig, prefix: str, purpose: ssl.Purpose) -> None:
    if tls.trust_store is None:
        ctx.load_default_certs(purpose)  # as Java falls back to the JDK's trusted CAs
        return
    contents = load_store(tls.trust_store, f"{prefix}trustStore")
    if not contents.chain:
        raise TlsConfigError(f"{prefix}trustStore.location={tls.trust_store.location}: no certificate in it")
    cadata = "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in contents.chain)
    ctx.load_verify_locations(cadata=cadata)


@dataclass(frozen=True)
class QuorumTls:
    """``sslQuorum``: the contexts of a member's election and quorum links, both ways (ZooKeeper's
    ``ssl.quorum.*`` stores; ``ssl.quorum.clientAuth`` need by default, so members prove themselves)."""

    server: ssl.SSLContext  # listening: the election port, and the quorum port while leading
    client: ssl.SSLContext  # dialling a peer's election port, or the leader's quorum port


def quorum_tls(tls: TlsConfig | None) -> QuorumTls | None:
    """The quorum's contexts, or None without ``sslQuorum``."""
    if tls is None:
        return None
    return QuorumTls(server_context(tls, "ssl.quorum."), client_context(tls, "ssl.quorum."))
