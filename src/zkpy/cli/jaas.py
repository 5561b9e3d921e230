"""JAAS login configuration files, as ZooKeeper's users write them for SASL.

Grammar (``javax.security.auth.login.ConfigFile``): sections ``Name { entry; ... };`` where an entry
is ``LoginModuleClass flag [option=value ...];`` and a value is a bare word or a double-quoted
string; ``//`` and ``/* */`` comments. zkpy serves DIGEST-MD5 from the ``user_NAME="password"``
options of ``DigestLoginModule`` in the server section, and recognises a Kerberos section
(``Krb5LoginModule``) so that it can refuse GSSAPI clearly.
"""

from __future__ import annotations

import os
import re

from zkpy.config import SaslConfig

_TOKEN = re.compile(r'\s*(?:(//[^\n]*|/\*.*?\*/)|("(?:[^"\\]|\\.)*")|([{};=])|([^\s{};="]+))', re.S)
_FLAGS = ("required", "requisite", "sufficient", "optional")
DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
KERBEROS_MODULES = ("com.sun.security.auth.module.Krb5LoginModule",)


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if not text[pos:].strip():
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"unexpected {text[pos:pos + 20].strip()!r}")
        pos = m.end()
        if m.group(1):
            continue
        if m.group(2):
            out.append("\0" + m.group(2)[1:-1].replace('\\"', '"').replace("\\\\", "\\"))
        else:
            out.append(m.group(3) or m.group(4))
    return out


def parse_jaas(text: str) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """Each section's entries: (login module class, options). ValueError names what is wrong."""
    toks = _tokens(text)
    sections: dict[str, list[tuple[str, dict[str, str]]]] = {}
    i = 0

    def take() -> str:
        nonlocal i
        if i >= len(toks):
            raise ValueError("the file ends inside a section")
        i += 1
        return toks[i - 1]

    while i < len(toks):
        name = take().lstrip("\0")
        if take() != "{":
            raise ValueError(f"section {name!r}: expected '{{' after its name")
        entries: list[tuple[str, dict[str, str]]] = []
        while True:
            tok = take()
            if tok == "}":
                if take() != ";":
                    raise ValueError(f"section {name!r}: expected ';' after '}}'")
                break
            module = tok.lstrip("\0")
            flag = take()
            if flag.lower() not in _FLAGS:
                raise ValueError(f"section {name!r}: {module} has flag {flag!r}, not one of {', '.join(_FLAGS)}")
            options: dict[str, str] = {}
            while (tok := take()) != ";":
                if take() != "=":
                    raise ValueError(f"section {name!r}: option {tok!r} has no '='")
                options[tok.lstrip("\0")] = take().lstrip("\0")
            entries.append((module, options))
        sections[name] = entries
    return sections


def read_sasl_section(path: str, section: str = "Server") -> SaslConfig | None:
    """The SASL users of ``section`` in the JAAS file at ``path``; None when the file has no such
    section (ZooKeeper then serves no client SASL, quietly: the file may be there for the quorum).
    ValueError (OSError as one) names the file and what is wrong; passwords never appear in a message."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ValueError(f"JAAS file {path}: cannot read: {exc.strerror}") from None
    try:
        sections = parse_jaas(text)
    except ValueError as exc:
        raise ValueError(f"JAAS file {path}: {exc}") from None
    if section not in sections:
        return None
    users: dict[str, str] = {}
    gssapi = False
    for module, options in sections[section]:
        if module in KERBEROS_MODULES:
            gssapi = True
        for key, value in options.items():
            if key.startswith("user_") and len(key) > 5:
                users[key[5:]] = value
    if not users and not gssapi:
        raise ValueError(f"JAAS file {path}: section {section!r} has no user_NAME=\"password\" option "
                         f"({DIGEST_MODULE}) and no Kerberos login module")
    return SaslConfig(users=users, jaas_file=path, section=section, gssapi=gssapi, random_bytes=os.urandom)


def read_quorum_sections(path: str, server_section: str, learner_section: str) -> tuple[dict[str, str], str, str]:
    """Quorum SASL's JAAS sections: the ``server_section``'s users (``user_NAME="password"``, who may
    connect to me) and the ``learner_section``'s ``username`` and ``password`` (who I am). ValueError
    names the file and the section; passwords never appear in a message."""
    try:
        with open(path, encoding="utf-8") as f:
            sections = parse_jaas(f.read())
    except OSError as exc:
        raise ValueError(f"JAAS file {path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise ValueError(f"JAAS file {path}: {exc}") from None
    for name in (server_section, learner_section):
        if name not in sections:
            raise ValueError(f"JAAS file {path} has no {name!r} section, which quorum.auth.enableSasl=true needs")
        if any(module in KERBEROS_MODULES for module, _ in sections[name]):
            raise ValueError(f"JAAS file {path}: section {name!r} logs in with Kerberos; zkpy serves quorum SASL "
                             "with DIGEST-MD5 only (no GSSAPI binding is installed)")
    users = {key[5:]: value for _, options in sections[server_section] for key, value in options.items()
             if key.startswith("user_") and len(key) > 5}
    learner = {key: value for _, options in sections[learner_section] for key, value in options.items()}
    if not users:
        raise ValueError(f"JAAS file {path}: section {server_section!r} has no user_NAME=\"password\" option")
    if not learner.get("username") or "password" not in learner:
        raise ValueError(f"JAAS file {path}: section {learner_section!r} needs username= and password= options")
    return users, learner["username"], learner["password"]
