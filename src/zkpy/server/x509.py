"""A TLS client's certificate as its ``x509:`` identity (ZooKeeper's X509AuthenticationProvider).

By default (``ssl.clientCertIdType=SDN``) the id is the certificate's subject in RFC 2253 form, as
Java's ``X500Principal.getName()`` writes it: the most specific attribute first
(``CN=client,OU=ops,O=example,C=US``). With ``SAN`` the id is taken from a subject alternative
name of the configured GeneralName tag (``ssl.clientCertIdSanMatchType``, 6 = URI, 2 = DNS,
7 = IP, 1 = email), the first that matches ``ssl.clientCertIdSanMatchRegex``, cut down by
``ssl.clientCertIdSanExtractRegex`` and its group. ``X509AuthenticationProvider.superUser`` names
an id that is also ``super``. The ids are matched exactly by ``x509:`` ACLs.
"""

from __future__ import annotations

import re

from cryptography import x509
from cryptography.x509.oid import NameOID

from zkpy.config import X509AuthConfig
from zkpy.wire.proto import Id

# the attribute keywords Java's RFC 2253 form uses; others are written as their dotted OID
_JAVA_KEYWORDS = {NameOID.COMMON_NAME: "CN", NameOID.COUNTRY_NAME: "C", NameOID.LOCALITY_NAME: "L",
                  NameOID.STATE_OR_PROVINCE_NAME: "ST", NameOID.ORGANIZATION_NAME: "O",
                  NameOID.ORGANIZATIONAL_UNIT_NAME: "OU", NameOID.STREET_ADDRESS: "STREET",
                  NameOID.DOMAIN_COMPONENT: "DC", NameOID.USER_ID: "UID"}
_SAN_TYPES: dict[int, type[x509.GeneralName]] = {1: x509.RFC822Name, 2: x509.DNSName, 6: x509.UniformResourceIdentifier,
                                                 7: x509.IPAddress}


class X509IdError(Exception):
    """The certificate gives no id under the configured rules (the connection is refused)."""


def subject_rfc2253(cert: x509.Certificate) -> str:
    """The subject as Java's ``X500Principal.getName()`` (RFC 2253) writes it."""
    return cert.subject.rfc4514_string(attr_name_overrides={oid: kw for oid, kw in _JAVA_KEYWORDS.items()})


def client_id(cert: x509.Certificate, cfg: X509AuthConfig) -> str:
    if cfg.id_type == "SDN":
        return subject_rfc2253(cert)
    kind = _SAN_TYPES.get(cfg.san_match_type)
    if kind is None:
        raise X509IdError(f"ssl.clientCertIdSanMatchType={cfg.san_match_type} is not a type zkpy reads")
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = san.get_values_for_type(kind)  # type: ignore[arg-type]
    except x509.ExtensionNotFound:
        raise X509IdError("the certificate has no subject alternative name") from None
    for name in map(str, names):  # (an IPAddress SAN as its text)
        if re.fullmatch(cfg.san_match_regex, name):
            found = re.search(cfg.san_extract_regex, name)
            if found is None:
                raise X509IdError(f"SAN {name!r} does not match ssl.clientCertIdSanExtractRegex")
            return found.group(cfg.san_extract_group)
    raise X509IdError("no subject alternative name matches ssl.clientCertIdSanMatchRegex")


def x509_identities(der: bytes, cfg: X509AuthConfig) -> list[Id]:
    """The ids a client certificate (DER) proves: ``x509:ID``, and ``super`` for the super user."""
    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError as exc:
        raise X509IdError(f"unreadable client certificate: {exc}") from None
    ident = client_id(cert, cfg)
    ids = [Id("x509", ident)]
    if cfg.super_user is not None and ident == cfg.super_user:
        ids.append(Id("super", ident))
    return ids
