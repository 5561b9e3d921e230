"""zoo.cfg as Java reads it, differentially: for each text below, java.util.Properties.load with
ZooKeeper 3.8's trimming (tests/interop/java/PropertiesDump.java) and zkpy's ``parse_properties``
give the same keys and values; and Apache ZooKeeper and zkpy, started from the same zoo.cfg written
with ``key value`` and ``key:value`` lines, report the same settings (``conf``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.conftest import require_apache

from zkpy.cli.properties import PropertiesError, parse_properties
from zkpy.testing.servers import ServerProcess, four_letter, start_apache, start_zkpy

DUMP = Path(__file__).parent / "java" / "PropertiesDump.java"

TEXTS = {
    "separators": "a=1\nb:2\nc 3\nd\t4\ne = 5\nf : 6\ng  =  7\nh\f8\ni= = 9\nj::10\nk =:11\n",
    "empty-and-bare": "empty=\nbare\n  spaced  \nx:\n",
    "comments": "# c\n! c\n   # indented comment\nkey=value # not a comment\n#=no\n",
    "continuations": "long = one, \\\n    two, \\\n\tthree\nodd=a\\\\\nnext=b\nend=c\\",
    "comment-continued": "# a comment \\\nnot.comment=1\n",
    "escapes": "tab=a\\tb\nnl=a\\nb\ncolon\\:key=v\\=x\nspace\\ key=v\nuni=\\u0041\\u00e9\nother=\\q\\z\n",
    "crlf": "a=1\r\nb=2\rc=3\r\n",
    "duplicates": "k=1\nk=2\n k = 3\n",
    "trailing": "v=value   \nw=\\ \\ x\\ \\ \n",
    "zoo.cfg": "tickTime 2000\ninitLimit:10\nsyncLimit = 5\ndataDir /var/lib/zookeeper\nclientPort:2181\n"
               "server.1 = 10.0.0.1:2888:3888\n4lw.commands.whitelist srvr, ruok\n",
}


def java_dump(path: Path) -> dict[str, str] | str:
    proc = subprocess.run(["java", "-Xshare:auto", str(DUMP), str(path)], capture_output=True, text=True,
                          timeout=120, check=True)
    if proc.stdout.startswith("error "):
        return proc.stdout.strip()
    out = {}
    for line in proc.stdout.splitlines():
        key, value = line.split("\t")
        out[_unescape(key)] = _unescape(value)
    return out


def _unescape(s: str) -> str:
    return s.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r").replace("\\\\", "\\")


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_zkpy_reads_properties_as_java_and_zookeeper_do(name: str, tmp_path: Path) -> None:
    require_apache()
    path = tmp_path / "zoo.cfg"
    path.write_bytes(TEXTS[name].encode("ascii"))
    assert parse_properties(TEXTS[name]) == java_dump(path)


def test_a_malformed_unicode_escape_is_refused_as_java_refuses_it(tmp_path: Path) -> None:
    require_apache()
    path = tmp_path / "zoo.cfg"
    path.write_bytes(b"a=1\nb=\\u12G4\n")
    assert java_dump(path) == "error IllegalArgumentException"
    with pytest.raises(PropertiesError, match="line 2"):
        parse_properties(path.read_text())


def _conf(server: ServerProcess) -> dict[str, str]:
    lines = four_letter(server.port, "conf").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_both_servers_read_key_value_and_key_colon_value_lines(tmp_path: Path) -> None:
    """The same zoo.cfg lines, each in one of Java's separators, as each server's settings."""
    require_apache()
    lines = {"tickTime": "tickTime 1500", "maxClientCnxns": "maxClientCnxns:33",
             "minSessionTimeout": "minSessionTimeout = 4000", "maxSessionTimeout": "maxSessionTimeout\t50000"}
    settings = {key: None for key in lines}  # the helper's own values for them are dropped
    extra = "\n".join(lines.values())
    seen = {}
    for kind, start in (("apache", start_apache), ("zkpy", start_zkpy)):
        server = start({**settings, "4lw.commands.whitelist": "*"}, extra_lines=extra)
        try:
            seen[kind] = {key: _conf(server).get(key) for key in lines}
        finally:
            server.cleanup()
    assert seen["zkpy"] == seen["apache"] == {"tickTime": "1500", "maxClientCnxns": "33",
                                              "minSessionTimeout": "4000", "maxSessionTimeout": "50000"}
