"""The Java system properties an operator gives ZooKeeper in ``SERVER_JVMFLAGS`` and ``JVMFLAGS``,
read as the zoo.cfg lines they stand for.

ZooKeeper 3.8's ``QuorumPeerConfig`` reads some zoo.cfg keys itself (``tickTime``, ``clientPort``,
``server.N``, ...) and turns every other line ``key=value`` into the system property
``zookeeper.<key>``, which is what the server then reads. So ``-Dzookeeper.<key>=value`` in the
JVM flags means what the zoo.cfg line ``<key>=value`` means, for every key QuorumPeerConfig does
not read itself, and the zoo.cfg line wins where both are given (it is set after the JVM starts).
A few properties are read by their own name, without the prefix and never from zoo.cfg
(``readonlymode.enabled``, ``jute.maxbuffer``): the flag wins over a zoo.cfg line there. zkServer.sh
passes ``$SERVER_JVMFLAGS $JVMFLAGS`` unquoted, so the words split on blanks and the last flag
naming a property wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from zkpy.cli.zoocfg_keys import rule_for

FLAG_VARIABLES = ("SERVER_JVMFLAGS", "JVMFLAGS")  # in the order zkServer.sh passes them to Java
PREFIX = "zookeeper."
SOURCE = "SERVER_JVMFLAGS/JVMFLAGS"

# The zoo.cfg keys QuorumPeerConfig.parseProperties reads itself: their zookeeper.* property is
# never read, so such a flag has no effect on ZooKeeper (server.N, group.N and weight.N are read
# there too, as prefixes).
READ_FROM_ZOO_CFG_ONLY = frozenset({
    "dataDir", "dataLogDir", "clientPort", "localSessionsEnabled", "localSessionsUpgradingEnabled",
    "clientPortAddress", "secureClientPort", "secureClientPortAddress", "observerMasterPort",
    "clientPortListenBacklog", "tickTime", "maxClientCnxns", "minSessionTimeout", "maxSessionTimeout",
    "initLimit", "syncLimit", "connectToLearnerMasterLimit", "electionAlg", "quorumListenOnAllIPs", "peerType",
    "syncEnabled", "dynamicConfigFile", "autopurge.snapRetainCount", "autopurge.purgeInterval",
    "standaloneEnabled", "reconfigEnabled", "sslQuorum", "portUnification", "sslQuorumReloadCertFiles",
    "quorum.auth.enableSasl", "quorum.auth.serverRequireSasl", "quorum.auth.learnerRequireSasl",
    "quorum.auth.learner.saslLoginContext", "quorum.auth.server.saslLoginContext",
    "quorum.auth.kerberos.servicePrincipal", "quorum.cnxn.threads.size", "jvm.pause.info-threshold.ms",
    "jvm.pause.warn-threshold.ms", "jvm.pause.sleep.time.ms", "jvm.pause.monitor", "metricsProvider.className",
    "multiAddress.enabled", "multiAddress.reachabilityCheckTimeoutMs", "multiAddress.reachabilityCheckEnabled",
    "oraclePath",
})
_READ_FROM_ZOO_CFG_ONLY_PREFIXES = ("server.", "group", "weight", "metricsProvider.")

# Properties ZooKeeper reads by their own name (no prefix), and the zoo.cfg key zkpy reads them as.
UNPREFIXED = {"readonlymode.enabled": "readonlymode.enabled", "jute.maxbuffer": "jute.maxbuffer"}


@dataclass(frozen=True)
class FlagSettings:
    """The JVM flags as zoo.cfg lines (key -> value)."""

    under_file: dict[str, str] = field(default_factory=dict)  # a zoo.cfg line of the same key wins
    over_file: dict[str, str] = field(default_factory=dict)  # they win over the zoo.cfg line
    without_effect: tuple[str, ...] = ()  # -Dzookeeper.<key> flags ZooKeeper reads from zoo.cfg only

    def merged_with(self, file_props: Mapping[str, str]) -> dict[str, str]:
        """zoo.cfg's lines with these under and over them."""
        return {**self._under(file_props), **file_props, **self.over_file}

    def taken(self, file_props: Mapping[str, str]) -> dict[str, str]:
        """zoo.cfg key -> the flag whose value ``merged_with`` keeps for it (``zookeeper.enforceQuota``,
        ``readonlymode.enabled``)."""
        return {**{k: PREFIX + k for k in self._under(file_props)}, **{k: k for k in self.over_file}}

    def _under(self, file_props: Mapping[str, str]) -> dict[str, str]:
        """The prefixed flags no zoo.cfg line overrides: one of the same key, or of the prefixed
        name where zkpy reads that spelling in zoo.cfg too (``zookeeper.enforceQuota``)."""
        return {k: v for k, v in self.under_file.items()
                if k not in file_props and not (PREFIX + k in file_props and rule_for(PREFIX + k) is not None)}


def system_properties(environ: Mapping[str, str]) -> dict[str, str]:
    """Every ``-Dname=value`` of the flag variables, the last one of a name winning (quotes around a
    value dropped: an operator who quotes one in the variable means the value)."""
    found: dict[str, str] = {}
    for variable in FLAG_VARIABLES:
        for word in environ.get(variable, "").split():
            if word.startswith("-D") and "=" in word:
                name, value = word[2:].split("=", 1)
                found[name] = value.strip("'\"")
    return found


def others(environ: Mapping[str, str], also_read: frozenset[str] = frozenset()) -> list[str]:
    """The words of the flag variables that are not a ZooKeeper property zkpy reads (``-Xmx1g``,
    ``-XX:+UseG1GC``, ``-Dcom.sun.management.jmxremote``): the JVM's, or other software's, with no
    effect in zkpy. ``also_read``: other property names read elsewhere (the JAAS file's)."""
    found = []
    for variable in FLAG_VARIABLES:
        for word in environ.get(variable, "").split():
            name = word[2:].split("=", 1)[0] if word.startswith("-D") else ""
            if not (name.startswith(PREFIX) or name in UNPREFIXED or name in also_read):
                found.append(word)
    return found


def as_zoo_cfg(properties: Mapping[str, str], defaults: Mapping[str, str] | None = None) -> FlagSettings:
    """The properties ZooKeeper would read, as the zoo.cfg lines that mean the same. Properties of
    the JVM or of other software (``-Xmx``, ``-Dcom.sun.management...``) are not ZooKeeper's and
    are left out; the JAAS file (``java.security.auth.login.config``) is read by ``security_keys``.
    ``defaults`` (zoo.cfg lines) go under the file's lines and the flags alike (``--from-env``'s
    addresses)."""
    under: dict[str, str] = dict(defaults or {})
    over: dict[str, str] = {}
    without: list[str] = []
    for name, value in properties.items():
        if name in UNPREFIXED:
            over[UNPREFIXED[name]] = value
        elif name.startswith(PREFIX) and len(name) > len(PREFIX):
            key = name[len(PREFIX):]
            if key in READ_FROM_ZOO_CFG_ONLY or key.startswith(_READ_FROM_ZOO_CFG_ONLY_PREFIXES):
                without.append(name)
            else:
                under[key] = value
    return FlagSettings(under, over, tuple(without))
