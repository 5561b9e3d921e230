"""zoo.cfg's security keys: TLS on the client port, x509 identities, SASL and enforced authentication.

ZooKeeper 3.8 turns each of these zoo.cfg keys into the system property ``zookeeper.<key>``; zkpy
reads them into ``ServerConfig``'s security fields. Keys that secure the quorum (``sslQuorum``,
``ssl.quorum.*``, ``quorum.auth.*``) are read here too. A bad value exits 2 naming the key and
the file (``ValueError`` here, turned into a ``ConfigError`` by the caller); whether the files
named here can be read, and their passwords, is checked when the TLS context is built
(``admin.tls``), before the server serves.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from zkpy.cli.jaas import read_quorum_sections
from zkpy.config import QuorumSaslConfig, SaslConfig, StoreConfig, TlsConfig, X509AuthConfig

X509_PROVIDER = "org.apache.zookeeper.server.auth.X509AuthenticationProvider"
SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
DIGEST_PROVIDER = "org.apache.zookeeper.server.auth.DigestAuthenticationProvider"
IP_PROVIDER = "org.apache.zookeeper.server.auth.IPAuthenticationProvider"
_KNOWN_PROVIDERS = {X509_PROVIDER: "x509", SASL_PROVIDER: "sasl", DIGEST_PROVIDER: "digest", IP_PROVIDER: "ip"}
STORE_TYPES = ("PEM", "PKCS12", "JKS")
CLIENT_AUTH = ("need", "want", "none")
JAAS_KEY = "java.security.auth.login.config"

STORE_KEYS = ("keyStore.location", "keyStore.password", "keyStore.passwordPath", "keyStore.type",
               "trustStore.location", "trustStore.password", "trustStore.passwordPath", "trustStore.type")
TLS_KEYS = ("clientAuth", "protocol", "enabledProtocols", "ciphersuites", "hostnameVerification")
X509_KEYS = ("clientCertIdType", "clientCertIdSanMatchType", "clientCertIdSanMatchRegex",
              "clientCertIdSanExtractRegex", "clientCertIdSanExtractMatcherGroupIndex")
# ssl.* keys ZooKeeper 3.8 reads that do not change what zkpy does (their WARN says why)
SSL_KEYS_WITHOUT_EFFECT = {
    "ssl.context.supplier.class": "a Java SSLContext supplier class; zkpy builds its context from the stores",
    "ssl.sslProvider": "a Java/Netty TLS provider; zkpy uses OpenSSL through Python's ssl module",
    "ssl.crl": "certificate revocation lists are not checked by zkpy",
    "ssl.ocsp": "OCSP is not checked by zkpy",
    "ssl.handshakeDetectionTimeoutMillis": "zkpy detects a TLS hello on the first bytes of a connection",
    "ssl.clientHostnameVerification": "zkpy does not check client certificates' host names",
    "sslQuorumReloadCertFiles": "zkpy reads its certificate files at start",
}

QUORUM_KEYS = ("sslQuorum", "quorum.auth.enableSasl", "quorum.auth.learnerRequireSasl",
               "quorum.auth.serverRequireSasl", "quorum.auth.learner.saslLoginContext",
               "quorum.auth.server.saslLoginContext", "quorum.auth.kerberos.servicePrincipal",
               "quorum.cnxn.threads.size")


def is_security_key(key: str) -> bool:
    """Whether ``key`` is read by this module (the rest of zoo.cfg is ``zoocfg``'s)."""
    return (key.startswith(("ssl.", "authProvider.", "enforce.auth.")) or key in QUORUM_KEYS
            or key in ("secureClientPort", "secureClientPortAddress", "client.portUnification",
                       "sessionRequireClientSASLAuth", "X509AuthenticationProvider.superUser",
                       "zookeeper.sasl.serverconfig", "kerberos.removeHostFromPrincipal",
                       "kerberos.removeRealmFromPrincipal", JAAS_KEY)
            or is_super_user_key(key))


def is_super_user_key(key: str) -> bool:
    """``superUser`` and ``superUser.*``: ZooKeeper makes them the system properties
    ``zookeeper.superUser[.*]``, whose values are SASL ids that are super users."""
    return key == "superUser" or key.startswith("superUser.")


Warn = Callable[[str, str], None]
"""``warn(key, why)``: the one WARN line for a key that has no effect."""

SaslReader = Callable[[str, str], SaslConfig | None]
"""``read(jaas_path, section)``: the section's users, None without the section (ValueError: a bad file)."""


def _bool(key: str, value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(f"{key}={value!r} must be true or false")
    return value.strip().lower() == "true"


def _list(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _store(props: Mapping[str, str], prefix: str, which: str, read_text: Callable[[str], str]) -> StoreConfig | None:
    location = props.get(f"{prefix}{which}.location", "").strip()
    password = props.get(f"{prefix}{which}.password")
    password_path = props.get(f"{prefix}{which}.passwordPath", "").strip()
    store_type = props.get(f"{prefix}{which}.type", "").strip().upper() or None
    if not location:
        for suffix in ("password", "passwordPath", "type"):
            if f"{prefix}{which}.{suffix}" in props:
                raise ValueError(f"{prefix}{which}.{suffix} is set but {prefix}{which}.location is not")
        return None
    if store_type is not None and store_type not in STORE_TYPES:
        raise ValueError(f"{prefix}{which}.type={store_type} is not one of {', '.join(STORE_TYPES)}")
    if password is None and password_path:
        try:
            password = read_text(password_path).rstrip("\r\n")
        except OSError as exc:
            raise ValueError(f"{prefix}{which}.passwordPath: cannot read {password_path}: {exc.strerror}") from None
    return StoreConfig(location, password, store_type)


def tls_config(props: Mapping[str, str], prefix: str, read_text: Callable[[str], str]) -> TlsConfig | None:
    """The ``<prefix>keyStore...`` / ``trustStore`` / ``clientAuth`` / ... keys (prefix ``ssl.`` or
    ``ssl.quorum.``), or None when no key store is configured."""
    key_store = _store(props, prefix, "keyStore", read_text)
    trust_store = _store(props, prefix, "trustStore", read_text)
    values: dict[str, Any] = {}
    client_auth = props.get(f"{prefix}clientAuth")
    if client_auth is not None:
        if client_auth.strip().lower() not in CLIENT_AUTH:
            raise ValueError(f"{prefix}clientAuth={client_auth!r} must be one of {', '.join(CLIENT_AUTH)}")
        values["client_auth"] = client_auth.strip().lower()
    if f"{prefix}protocol" in props:
        values["protocol"] = _protocol(f"{prefix}protocol", props[f"{prefix}protocol"])
    if f"{prefix}enabledProtocols" in props:
        values["enabled_protocols"] = tuple(_protocol(f"{prefix}enabledProtocols", p)
                                            for p in _list(props[f"{prefix}enabledProtocols"]))
    if f"{prefix}ciphersuites" in props:
        values["ciphersuites"] = _list(props[f"{prefix}ciphersuites"])
    if f"{prefix}hostnameVerification" in props:
        values["hostname_verification"] = _bool(f"{prefix}hostnameVerification",
                                                props[f"{prefix}hostnameVerification"])
    if key_store is None:
        if trust_store is not None or values:
            return TlsConfig(None, trust_store, **values)
        return None
    return TlsConfig(key_store, trust_store, **values)


_PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3", "TLS")


def _protocol(key: str, value: str) -> str:
    value = value.strip()
    if value not in _PROTOCOLS:
        raise ValueError(f"{key}={value!r} is not one of {', '.join(_PROTOCOLS)}")
    return value


def _port(key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{key}={value!r} is not an integer") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"{key}={value} is out of range")
    return number


def security_config(props: Mapping[str, str], warn: Warn, read_text: Callable[[str], str],
                    read_sasl: SaslReader, jaas_path: str | None) -> dict[str, Any]:
    """ServerConfig's security fields from zoo.cfg's properties. ``jaas_path`` is the JAAS file the
    environment names (``-Djava.security.auth.login.config`` in ``SERVER_JVMFLAGS``/``JVMFLAGS``);
    the zoo.cfg key of the same name wins over it."""
    values: dict[str, Any] = {}
    if "secureClientPort" in props:
        values["secure_client_port"] = _port("secureClientPort", props["secureClientPort"])
    if "secureClientPortAddress" in props:
        values["secure_client_port_address"] = props["secureClientPortAddress"].strip()
    if "client.portUnification" in props:
        values["port_unification"] = _bool("client.portUnification", props["client.portUnification"])
    tls = tls_config(props, "ssl.", read_text)
    if tls is not None:
        values["tls"] = tls
    if ("secure_client_port" in values or values.get("port_unification")) and (tls is None or tls.key_store is None):
        key = "secureClientPort" if "secure_client_port" in values else "client.portUnification"
        raise ValueError(f"{key} is set but ssl.keyStore.location is not: TLS needs a key store")

    schemes: dict[str, str] = {}
    for key, value in props.items():
        if key.startswith("authProvider."):
            cls = value.strip()
            scheme = _KNOWN_PROVIDERS.get(cls)
            if scheme is None:
                raise ValueError(f"{key}={cls}: zkpy knows only the providers {', '.join(sorted(_KNOWN_PROVIDERS))}")
            schemes[scheme] = key
    ssl_provider = props.get("ssl.authProvider", "x509").strip()
    if ssl_provider not in ("x509", *schemes):
        raise ValueError(f"ssl.authProvider={ssl_provider}: no authProvider.N line registers that scheme")
    # a TLS client's certificate is its x509: id whether or not authProvider.N names the x509
    # provider: ZooKeeper 3.8's TLS port registers it by itself (measured)
    values["x509"] = _x509(props)
    if "x509" in schemes and tls is None:
        warn(schemes["x509"], "no ssl.keyStore is configured, so no client presents a certificate")

    section = props.get("zookeeper.sasl.serverconfig", "Server").strip() or "Server"
    path = props.get(JAAS_KEY, "").strip() or jaas_path
    values["sasl_auth"] = "sasl" in schemes
    sasl = read_sasl(path, section) if path else None
    if path and sasl is None and "sasl" in schemes:
        warn(schemes["sasl"], f"the JAAS file {path} has no {section!r} section, so no client can authenticate "
                              "with SASL")
    if sasl is not None:
        values["sasl"] = sasl
        if sasl.gssapi:
            raise ValueError(f"JAAS file {path}: section {section!r} logs in with Kerberos (Krb5LoginModule), "
                             "so ZooKeeper would serve SASL GSSAPI; zkpy cannot: no GSSAPI binding (python-gssapi) "
                             "is installed. Serve DIGEST-MD5 instead (DigestLoginModule with user_NAME=\"password\")")
        supers = tuple(props[k].strip() for k in sorted(props) if is_super_user_key(k) and props[k].strip())
        if supers:
            values["sasl"] = _replace_sasl(values["sasl"], super_users=supers)
    elif "sasl" in schemes and not path:
        warn(schemes["sasl"], f"no JAAS file is configured (set {JAAS_KEY} in zoo.cfg or "
                              f"-D{JAAS_KEY}=FILE in SERVER_JVMFLAGS), so no client can authenticate with SASL")
    for key in ("kerberos.removeHostFromPrincipal", "kerberos.removeRealmFromPrincipal"):
        if key in props and "sasl" in values:
            field_name = "remove_host_from_principal" if "Host" in key else "remove_realm_from_principal"
            values["sasl"] = _replace_sasl(values["sasl"], **{field_name: _bool(key, props[key])})

    if props.get("enforce.auth.enabled") is not None and _bool("enforce.auth.enabled", props["enforce.auth.enabled"]):
        enforced = _list(props.get("enforce.auth.schemes", ""))
        if not enforced:
            raise ValueError("enforce.auth.enabled=true needs enforce.auth.schemes")
        for scheme in enforced:
            if scheme not in ("digest", "x509", "ip", *schemes):
                # ZooKeeper 3.8 exits: "Authentication scheme sasl is not available." (no authProvider.N for it)
                raise ValueError(f"enforce.auth.schemes names {scheme!r}, which no auth provider serves"
                                 + (f" (set authProvider.1={SASL_PROVIDER})" if scheme == "sasl" else ""))
        values["enforce_auth_schemes"] = enforced
    elif "enforce.auth.schemes" in props:
        warn("enforce.auth.schemes", "enforce.auth.enabled is not true")
    if "sessionRequireClientSASLAuth" in props:
        values["session_require_client_sasl_auth"] = _bool("sessionRequireClientSASLAuth",
                                                           props["sessionRequireClientSASLAuth"])
        if values["session_require_client_sasl_auth"] and "sasl" not in values:
            raise ValueError("sessionRequireClientSASLAuth=true but no JAAS Server section is configured")
        if values["session_require_client_sasl_auth"] and "sasl" not in schemes:
            # ZooKeeper 3.8 exits: "Authentication scheme sasl is not available."
            raise ValueError(f"sessionRequireClientSASLAuth=true needs authProvider.1={SASL_PROVIDER}")
    for key, why in SSL_KEYS_WITHOUT_EFFECT.items():
        if key in props:
            warn(key, why)
    values.update(_quorum_security(props, warn, read_text, path))
    read = {"secureClientPort", "secureClientPortAddress", "client.portUnification", "ssl.authProvider",
            "zookeeper.sasl.serverconfig", JAAS_KEY, "kerberos.removeHostFromPrincipal",
            "kerberos.removeRealmFromPrincipal", "enforce.auth.enabled", "enforce.auth.schemes",
            "sessionRequireClientSASLAuth", "X509AuthenticationProvider.superUser", *SSL_KEYS_WITHOUT_EFFECT,
            *QUORUM_KEYS, *(f"ssl.{k}" for k in (*STORE_KEYS, *TLS_KEYS, *X509_KEYS)),
            *(f"ssl.quorum.{k}" for k in (*STORE_KEYS, *TLS_KEYS))}
    for key in props:
        if is_super_user_key(key):
            if "sasl" not in values:
                warn(key, "no JAAS file is configured, so no client has a SASL id")
            continue
        if is_security_key(key) and key not in read and not key.startswith("authProvider."):
            warn(key, "ZooKeeper 3.8 does not know it either")
    return values


def _replace_sasl(sasl: SaslConfig, **changes: Any) -> SaslConfig:
    from dataclasses import replace

    return replace(sasl, **changes)


def _x509(props: Mapping[str, str]) -> X509AuthConfig:
    values: dict[str, Any] = {}
    id_type = props.get("ssl.clientCertIdType")
    if id_type is not None:
        if id_type.strip().upper() not in ("SDN", "SAN"):
            raise ValueError(f"ssl.clientCertIdType={id_type!r} must be SDN or SAN")
        values["id_type"] = id_type.strip().upper()
    for key, name in (("ssl.clientCertIdSanMatchType", "san_match_type"),
                      ("ssl.clientCertIdSanExtractMatcherGroupIndex", "san_extract_group")):
        if key in props:
            try:
                values[name] = int(props[key])
            except ValueError:
                raise ValueError(f"{key}={props[key]!r} is not an integer") from None
    for key, name in (("ssl.clientCertIdSanMatchRegex", "san_match_regex"),
                      ("ssl.clientCertIdSanExtractRegex", "san_extract_regex")):
        if key in props:
            try:
                re.compile(props[key])
            except re.error as exc:
                raise ValueError(f"{key}={props[key]!r} is not a regular expression: {exc}") from None
            values[name] = props[key]
    if props.get("X509AuthenticationProvider.superUser", "").strip():
        values["super_user"] = props["X509AuthenticationProvider.superUser"].strip()
    return X509AuthConfig(**values)


def _quorum_security(props: Mapping[str, str], warn: Warn, read_text: Callable[[str], str],
                     jaas_path: str | None) -> dict[str, Any]:
    """``sslQuorum`` (TLS between members, with the ``ssl.quorum.*`` stores) and quorum SASL
    (``quorum.auth.enableSasl``, DIGEST-MD5 from the JAAS file's ``QuorumServer`` and
    ``QuorumLearner`` sections, as ZooKeeper names them). Settings of either without it have no
    effect (as in ZooKeeper)."""
    values: dict[str, Any] = {}
    ssl_quorum = "sslQuorum" in props and _bool("sslQuorum", props["sslQuorum"])
    if ssl_quorum:
        tls = tls_config(props, "ssl.quorum.", read_text)
        if tls is None or tls.key_store is None:
            raise ValueError("sslQuorum=true but ssl.quorum.keyStore.location is not set")
        values["quorum_tls"] = tls
    flags = {key: key in props and _bool(key, props[key]) for key in
             ("quorum.auth.enableSasl", "quorum.auth.learnerRequireSasl", "quorum.auth.serverRequireSasl")}
    sasl_quorum = flags["quorum.auth.enableSasl"]
    if sasl_quorum:
        if not jaas_path:
            raise ValueError(f"quorum.auth.enableSasl=true but no JAAS file is configured (set {JAAS_KEY} in zoo.cfg "
                             f"or -D{JAAS_KEY}=FILE in SERVER_JVMFLAGS)")
        server_section = props.get("quorum.auth.server.saslLoginContext", "QuorumServer").strip()
        learner_section = props.get("quorum.auth.learner.saslLoginContext", "QuorumLearner").strip()
        users, user, password = read_quorum_sections(jaas_path, server_section, learner_section)
        values["quorum_sasl"] = QuorumSaslConfig(flags["quorum.auth.learnerRequireSasl"],
                                                 flags["quorum.auth.serverRequireSasl"], users, user, password, jaas_path)
    for key in props:
        if key.startswith("ssl.quorum.") and not ssl_quorum:
            warn(key, "sslQuorum is not true")
        elif key == "quorum.auth.kerberos.servicePrincipal" and sasl_quorum:
            warn(key, "zkpy's quorum SASL is DIGEST-MD5, which names no Kerberos principal")
        elif key.startswith("quorum.auth.") and key != "quorum.auth.enableSasl" and not sasl_quorum:
            warn(key, "quorum.auth.enableSasl is not true")
        elif key == "quorum.cnxn.threads.size":
            warn(key, "zkpy authenticates quorum connections on its event loop")
    return values
