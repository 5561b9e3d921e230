"""``zkpy server --from-env``: zkpy as the official ``zookeeper`` image's entrypoint runs ZooKeeper.

It takes that image's variables verbatim and, where no ``zoo.cfg`` is mounted in ``ZOO_CONF_DIR``
and no ``myid`` in ``ZOO_DATA_DIR``, writes the files its ``docker-entrypoint.sh`` writes: the
``dataDir``, ``dataLogDir``, ``tickTime``, ``initLimit``, ``syncLimit``, autopurge,
``maxClientCnxns``, ``standaloneEnabled`` and ``admin.enableServer`` lines from ``ZOO_*`` (the
image's defaults where unset), then each word of ``ZOO_SERVERS`` (one standalone member on 2181
without it), ``4lw.commands.whitelist`` from ``ZOO_4LW_COMMANDS_WHITELIST`` and each word of
``ZOO_CFG_EXTRA``; ``myid`` holds ``ZOO_MY_ID`` (1 without it). ``-D`` properties in
``JVMFLAGS``/``SERVER_JVMFLAGS`` are read as everywhere (``jvmflags``).

In a Kubernetes StatefulSet two variables of zkpy's own stand for ``ZOO_MY_ID`` and
``ZOO_SERVERS`` where those are unset: ``ZKPY_REPLICAS`` (the StatefulSet's size) and
``ZKPY_PEER_SERVICE`` (its headless Service's domain, e.g. ``zkpy-hs``). The pod ``zkpy-2``
then is myid 3, and the members are ``server.N=zkpy-(N-1).zkpy-hs:2888:3888;2181`` (the set's
name and the ordinal read from ``HOSTNAME``), as the Kubernetes tutorial's script writes them.

A container's network namespace is its boundary, so there, and only there, the client port, the
AdminServer and /metrics listen on every address unless the configuration names one
(``CONTAINER_ADDRESSES``, under zoo.cfg's own lines and the JVM flags).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from zkpy.runtime.osdisk import write_text_atomically

# the official image's ENV defaults (its Dockerfile), by variable
IMAGE_DEFAULTS = {
    "ZOO_CONF_DIR": "/conf",
    "ZOO_DATA_DIR": "/data",
    "ZOO_DATA_LOG_DIR": "/datalog",
    "ZOO_LOG_DIR": "/logs",
    "ZOO_TICK_TIME": "2000",
    "ZOO_INIT_LIMIT": "5",
    "ZOO_SYNC_LIMIT": "2",
    "ZOO_AUTOPURGE_PURGEINTERVAL": "0",
    "ZOO_AUTOPURGE_SNAPRETAINCOUNT": "3",
    "ZOO_MAX_CLIENT_CNXNS": "60",
    "ZOO_STANDALONE_ENABLED": "true",
    "ZOO_ADMINSERVER_ENABLED": "true",
}
DEFAULT_SERVERS = "server.1=localhost:2888:3888;2181"  # without ZOO_SERVERS: one member, client port 2181
CONTAINER_ADDRESSES = {"clientPortAddress": "0.0.0.0", "admin.serverAddress": "0.0.0.0",
                       "metricsProvider.httpHost": "0.0.0.0"}


def _var(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name, IMAGE_DEFAULTS.get(name, ""))


class ContainerError(ValueError):
    """Variables that cannot make a configuration: the message names them."""


def with_statefulset(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with ``ZOO_MY_ID`` and ``ZOO_SERVERS`` made from ``ZKPY_REPLICAS``,
    ``ZKPY_PEER_SERVICE`` and ``HOSTNAME`` where they are unset (see the module doc)."""
    env = dict(environ)
    replicas = env.get("ZKPY_REPLICAS")
    if not replicas:
        return env
    service = env.get("ZKPY_PEER_SERVICE", "")
    name, _, ordinal = env.get("HOSTNAME", "").rpartition("-")
    if not replicas.isdigit() or int(replicas) < 1:
        raise ContainerError(f"ZKPY_REPLICAS={replicas!r} is not a positive number")
    if not name or not ordinal.isdigit():
        raise ContainerError(f"HOSTNAME={env.get('HOSTNAME', '')!r} is not a StatefulSet pod's name (NAME-ORDINAL)")
    if not service:
        raise ContainerError("ZKPY_REPLICAS needs ZKPY_PEER_SERVICE, the headless Service's domain")
    env.setdefault("ZOO_MY_ID", str(int(ordinal) + 1))
    env.setdefault("ZOO_SERVERS", " ".join(f"server.{i + 1}={name}-{i}.{service}:2888:3888;2181"
                                           for i in range(int(replicas))))
    return env


def zoo_cfg_text(environ: Mapping[str, str]) -> str:
    """The zoo.cfg the official entrypoint writes for these variables."""
    lines = [
        f"dataDir={_var(environ, 'ZOO_DATA_DIR')}",
        f"dataLogDir={_var(environ, 'ZOO_DATA_LOG_DIR')}",
        f"tickTime={_var(environ, 'ZOO_TICK_TIME')}",
        f"initLimit={_var(environ, 'ZOO_INIT_LIMIT')}",
        f"syncLimit={_var(environ, 'ZOO_SYNC_LIMIT')}",
        f"autopurge.snapRetainCount={_var(environ, 'ZOO_AUTOPURGE_SNAPRETAINCOUNT')}",
        f"autopurge.purgeInterval={_var(environ, 'ZOO_AUTOPURGE_PURGEINTERVAL')}",
        f"maxClientCnxns={_var(environ, 'ZOO_MAX_CLIENT_CNXNS')}",
        f"standaloneEnabled={_var(environ, 'ZOO_STANDALONE_ENABLED')}",
        f"admin.enableServer={_var(environ, 'ZOO_ADMINSERVER_ENABLED')}",
    ]
    lines += (environ.get("ZOO_SERVERS") or DEFAULT_SERVERS).split()
    if environ.get("ZOO_4LW_COMMANDS_WHITELIST"):
        lines.append(f"4lw.commands.whitelist={environ['ZOO_4LW_COMMANDS_WHITELIST']}")
    lines += environ.get("ZOO_CFG_EXTRA", "").split()
    return "".join(line + "\n" for line in lines)


def myid_text(environ: Mapping[str, str]) -> str:
    """The myid the official entrypoint writes: ``ZOO_MY_ID``, 1 without it (an empty one too)."""
    return f"{environ.get('ZOO_MY_ID') or '1'}\n"


@dataclass(frozen=True)
class Prepared:
    zoo_cfg: str  # the path of the zoo.cfg to run
    wrote: tuple[str, ...]  # the files written (none where they were mounted)


def prepare(environ: Mapping[str, str]) -> Prepared:
    """Write zoo.cfg and myid where the official entrypoint would (and only where absent); the
    data, log and conf directories are made if missing. OSError names the path that failed;
    ContainerError, the variables."""
    environ = with_statefulset(environ)
    conf_dir, data_dir = _var(environ, "ZOO_CONF_DIR"), _var(environ, "ZOO_DATA_DIR")
    cfg = os.path.join(conf_dir, "zoo.cfg")
    myid = os.path.join(data_dir, "myid")
    wrote = []
    for directory in (conf_dir, data_dir, _var(environ, "ZOO_DATA_LOG_DIR")):
        os.makedirs(directory, exist_ok=True)
    if not os.path.isfile(cfg):
        write_text_atomically(cfg, zoo_cfg_text(environ))
        wrote.append(cfg)
    if not os.path.isfile(myid):
        write_text_atomically(myid, myid_text(environ))
        wrote.append(myid)
    return Prepared(cfg, tuple(wrote))
