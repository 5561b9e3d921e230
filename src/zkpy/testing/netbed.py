"""A test bed of real network addresses on one machine: each host of a test (an ensemble member, or
a client that must sit on one side of a partition) in a network namespace of its own, the hosts
joined by a bridge, as separate machines on one switch.

Every host ``i`` (1..n) has the address ``198.18.X.i/24``; the test process itself is host
``TESTER`` (254) on the same switch, through a veth pair whose far end is the only link the bed
adds to the machine's own namespace. ``198.18.0.0/15`` is set aside for network tests (RFC 2544),
and no namespace of the bed has a default route: no packet leaves the machine. Faults are made at
the switch, so a host keeps its own address and its local clients while cut off:

- ``isolate(i)`` / ``heal(i)``: host ``i``'s switch port down / up (every link of it, both ways);
- ``partition(group)`` / ``join()``: the hosts of ``group`` on a second bridge, a side of their own
  (the tester stays with the rest);
- ``flap(i, times, period_s)``: the port down and up again.

The switch is a bridge in a namespace of its own (the machine's namespace holds no bridge); the bed
is removed by ``close()`` and, if a process died with one standing, by the next bed made on the
machine. It needs root and iproute2 (``ip``): ``unavailable()`` says why a machine cannot make one.
The kernel's netem is not needed (delay and loss, where wanted, go through ``zkpy.testing.proxy``).

Members run inside their hosts (``ip netns exec``): ``start_bed_ensemble`` starts an ensemble of zkpy
or Apache ZooKeeper members configured by address, as in production (``server.N=198.18.X.N:2888:3888``,
every member on the same ports).
"""

from __future__ import annotations

import itertools
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence

from zkpy.cli.service import alive
from zkpy.testing.servers import ServerProcess, _launch_members, xdist_share

TESTER = 254  # the test process's host number on every bed
CLIENT_PORT, QUORUM_PORT, ELECTION_PORT = 2181, 2888, 3888
_NAME = re.compile(r"^zkb(\d+)([a-z])")
_counter = itertools.count()


def unavailable() -> str | None:
    """Why this machine cannot make a bed (None: it can): not root, no iproute2, or namespaces
    refused (a container without CAP_SYS_ADMIN), tried with one probe namespace."""
    if os.geteuid() != 0:
        return "the network test bed needs root (ip netns); .ci/run runs as root"
    if shutil.which("ip") is None:
        return "the network test bed needs iproute2 (ip)"
    probe = f"zkb{os.getpid()}zprobe"
    made = _ip("netns", "add", probe, check=False)
    _ip("netns", "del", probe, check=False)
    if made.returncode != 0:
        return f"this machine refuses network namespaces: ip netns add: {made.stderr.strip()}"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


class NetBed:
    """``hosts`` namespaces on one switch, and the tester's port on it (see the module's docstring)."""

    def __init__(self, hosts: int) -> None:
        reason = unavailable()
        if reason is not None:
            raise RuntimeError(reason)
        if not 1 <= hosts < TESTER:
            raise ValueError(f"a bed has 1 to {TESTER - 1} hosts")
        _remove_stale_beds()
        self.hosts = hosts
        self.tag = f"zkb{os.getpid()}{'abcdefghijklmnopqrstuvwxyz'[next(_counter) % 26]}"
        self.subnet = _free_subnet()
        self.switch = f"{self.tag}sw"
        self._made: list[str] = []  # namespaces made, to remove
        self._tester_link = f"{self.tag}t"
        self._partitioned: set[int] = set()
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    # ---- addresses and commands

    def address(self, host: int) -> str:
        return f"{self.subnet}.{host}"

    def namespace(self, host: int) -> str:
        return f"{self.tag}h{host}"

    def command(self, host: int, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside host ``host`` (``ip netns exec`` execs it: the process is ``argv``'s)."""
        return ["ip", "netns", "exec", self.namespace(host), *argv]

    def run_python(self, host: int, code: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Python ``code`` run inside host ``host`` (a client on that host's side of a partition)."""
        return subprocess.run(self.command(host, [sys.executable, "-c", code]), capture_output=True, text=True,
                              timeout=timeout_s, check=False)

    # ---- faults

    def isolate(self, host: int) -> None:
        """Cut every link of host ``host`` (its switch port down)."""
        _ip("-n", self.switch, "link", "set", self._port(host), "down")

    def heal(self, host: int) -> None:
        _ip("-n", self.switch, "link", "set", self._port(host), "up")

    def partition(self, group: Sequence[int]) -> None:
        """The hosts of ``group`` on a side of their own; the others (and the tester) on the other."""
        for host in range(1, self.hosts + 1):
            bridge = "brb" if host in group else "bra"
            _ip("-n", self.switch, "link", "set", self._port(host), "master", bridge)
        self._partitioned = set(group)

    def join(self) -> None:
        """Every host back on one side."""
        for host in self._partitioned:
            _ip("-n", self.switch, "link", "set", self._port(host), "master", "bra")
        self._partitioned = set()

    def flap(self, host: int, times: int, period_s: float) -> None:
        """Host ``host``'s links down and up ``times`` times, ``period_s`` a cycle."""
        for _ in range(times):
            self.isolate(host)
            time.sleep(period_s / 2)
            self.heal(host)
            time.sleep(period_s / 2)

    # ---- life

    def _port(self, host: int) -> str:
        return f"{self.tag}s{host}"

    def _make(self) -> None:
        _ip("netns", "add", self.switch)
        self._made.append(self.switch)
        for bridge in ("bra", "brb"):
            _ip("-n", self.switch, "link", "add", bridge, "type", "bridge")
            _ip("-n", self.switch, "link", "set", bridge, "up")
        for host in range(1, self.hosts + 1):
            ns = self.namespace(host)
            _ip("netns", "add", ns)
            self._made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            inner = f"{self.tag}h{host}"
            _ip("link", "add", inner, "type", "veth", "peer", "name", self._port(host))
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", self._port(host), "netns", self.switch)
            _ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", self.switch, "link", "set", self._port(host), "master", "bra")
            _ip("-n", self.switch, "link", "set", self._port(host), "up")
        far = f"{self.tag}T"
        _ip("link", "add", self._tester_link, "type", "veth", "peer", "name", far)
        _ip("link", "set", far, "netns", self.switch)
        _ip("-n", self.switch, "link", "set", far, "master", "bra")
        _ip("-n", self.switch, "link", "set", far, "up")
        _ip("addr", "add", f"{self.address(TESTER)}/24", "dev", self._tester_link)
        _ip("link", "set", self._tester_link, "up")

    def close(self) -> None:
        _ip("link", "del", self._tester_link, check=False)
        for ns in reversed(self._made):
            _ip("netns", "del", ns, check=False)
        self._made.clear()

    def __enter__(self) -> NetBed:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _free_subnet() -> str:
    """A ``198.18.X`` no address of this machine's namespace uses, from this pytest-xdist worker's
    share of the 256 (two workers' beds never meet)."""
    used = set(re.findall(r"inet 198\.18\.(\d+)\.", _ip("-4", "-o", "addr", "show").stdout))
    share = [x for x in range(*xdist_share(0, 256)) if str(x) not in used]
    if not share:
        raise RuntimeError("no free 198.18.X/24 for a test bed")
    return f"198.18.{random.choice(share)}"


def _remove_stale_beds() -> None:
    """The namespaces and links of beds whose process is gone (a test run killed mid-way)."""
    names = [line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line.strip()]
    links = re.findall(r"^\d+: (zkb\d+[a-z]t)[@:]", _ip("-o", "link", "show").stdout, re.MULTILINE)
    for name in [*names, *links]:
        m = _NAME.match(name)
        if m is None or alive(int(m.group(1))):
            continue
        if name in links:
            _ip("link", "del", name, check=False)
        else:
            _ip("netns", "del", name, check=False)


# ---- ensembles on a bed


def start_bed_ensemble(bed: NetBed, kinds: Sequence[str], settings: Mapping[str, str | None] | None = None, *,
                       tick_ms: int = 500, jvm_props: Mapping[str, str] | None = None, ready_s: float = 60.0,
                       member_settings: Mapping[int, Mapping[str, str | None]] | None = None) -> list[ServerProcess]:
    """Member ``i + 1`` a ``kinds[i]`` server (``zkpy`` or ``apache``) inside host ``i + 1``, every
    member on the same ports at its own address; returned, in myid order, once each serves as a
    leader or follower. ``member_settings[myid]`` goes on top of ``settings`` in that member's
    zoo.cfg (a ``server.N`` line of its own, through a proxy, say). ``zkpy.testing.servers``'
    ensemble helpers work on them (``server_mode``, ``ensemble_leader``, ``wait_ensemble_serving``,
    ``restart_ensemble_member``, ``cleanup_ensemble``)."""
    if len(kinds) > bed.hosts:
        raise ValueError(f"{len(kinds)} members on a bed of {bed.hosts} hosts")
    members = {f"server.{i}": f"{bed.address(i)}:{QUORUM_PORT}:{ELECTION_PORT};{bed.address(i)}:{CLIENT_PORT}"
               for i in range(1, len(kinds) + 1)}
    return _launch_members(tempfile.mkdtemp(prefix="zk-netbed-"), [(kind, i, CLIENT_PORT) for i, kind in enumerate(kinds, 1)],
                           members, settings, tick_ms=tick_ms, jvm_props=jvm_props, observers=(), wait=True,
                           ready_s=ready_s, member_settings=member_settings,
                           place=lambda myid: (bed.address(myid), bed.command(myid, [])))
