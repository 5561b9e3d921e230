"""``zkpy``: run a server (flags or zoo.cfg) and the operator tools."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import sys

import click

from zkpy.cli.ensemble import ensemble
from zkpy.cli.security_keys import jaas_path_from_flags, super_users_from_flags
from zkpy.cli.storage_tools import logdump, purge, snapdump
from zkpy.cli.zoocfg import ConfigError, load_zoo_cfg
from zkpy.config import ServerConfig
from zkpy.storage.disk import FaultPlan


@click.group()
@click.version_option(package_name="zkpy")
def main() -> None:
    """zkpy: ZooKeeper in Python."""


@main.command()
@click.argument("zoo_cfg", required=False, type=click.Path(dir_okay=False))
@click.option("--port", "client_port", type=int, help="clientPort (default 2181)")
@click.option("--address", "client_port_address", help="clientPortAddress (default 127.0.0.1)")
@click.option("--data-dir", "data_dir", help="dataDir (default ./zkpy-data)")
@click.option("--tick-ms", "tick_ms", type=int, help="tickTime in ms (default 2000)")
@click.option("--4lw", "four_letter_words", help="4lw.commands.whitelist, comma separated ('*' for all)")
@click.option("--extended-types/--no-extended-types", default=None, help="enable TTL nodes (extendedTypesEnabled)")
@click.option("--log-level", default="INFO", show_default=True)
@click.option("--fault", "faults", multiple=True, hidden=True,
              help="test-only disk fault: lose-unsynced, enospc-after=BYTES, eio-after=BYTES, eio-on-sync=N")
def server(zoo_cfg: str | None, log_level: str, faults: tuple[str, ...], **flags: object) -> None:
    """Run a standalone server, configured by ZOO_CFG and/or flags (flags win)."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        jaas = jaas_path_from_flags(os.environ.get("SERVER_JVMFLAGS", ""), os.environ.get("JVMFLAGS", ""))
        address_flag = flags.get("client_port_address") is not None
        config = load_zoo_cfg(zoo_cfg, jaas_path=jaas, loopback_note=not address_flag) if zoo_cfg else ServerConfig()
        if not zoo_cfg and not address_flag:
            logging.getLogger("zkpy.config").warning(
                "no clientPortAddress (or --address): zkpy listens on 127.0.0.1 only; set clientPortAddress "
                "in zoo.cfg (or --address 0.0.0.0) for remote clients")
    except ConfigError as exc:
        click.echo(f"zkpy: {exc}", err=True)
        sys.exit(EXIT_CONFIG)
    sasl_supers = super_users_from_flags(os.environ.get("SERVER_JVMFLAGS", ""), os.environ.get("JVMFLAGS", ""))
    if sasl_supers and config.sasl is not None:  # -Dzookeeper.superUser=NAME, as zkServer.sh passes it
        from dataclasses import replace as _replace

        config = _replace(config, sasl=_replace(config.sasl, super_users=(*config.sasl.super_users, *sasl_supers)))
    if config.quorum is not None and config.quorum.is_ensemble:
        problem = _ensemble_problem(config)
        if problem is not None:
            click.echo(f"zkpy: {zoo_cfg}: {problem}", err=True)
            sys.exit(EXIT_CONFIG)
    if config.quorum_tls is not None or (config.tls is not None and (config.secure_client_port is not None
                                                                      or config.port_unification)):
        from zkpy.admin.tls import TlsConfigError, quorum_tls, server_context

        try:
            if config.secure_client_port is not None or config.port_unification:
                assert config.tls is not None
                server_context(config.tls)
            quorum_tls(config.quorum_tls)
        except TlsConfigError as exc:
            click.echo(f"zkpy: {zoo_cfg}: {exc}", err=True)
            sys.exit(EXIT_CONFIG)
    overrides = {k: v for k, v in flags.items() if v is not None}
    if "four_letter_words" in overrides:
        overrides["four_letter_words"] = frozenset(w.strip() for w in str(overrides["four_letter_words"]).split(","))
    if overrides:
        from dataclasses import replace

        config = replace(config, **overrides)  # type: ignore[arg-type]
    _run(config, _fault_plan(faults))


def _ensemble_problem(config: ServerConfig) -> str | None:
    """What an ensemble zoo.cfg lacks for this server to join (QuorumPeerConfig's checks)."""
    q = config.quorum
    assert q is not None
    if q.my_id is None:
        return f"myid: no myid file in {config.data_dir} for an ensemble member"
    if q.me is None:
        return f"myid: {q.my_id} has no server.{q.my_id} line"
    if q.init_limit_ticks <= 0:
        return "initLimit: must be set (in ticks) for an ensemble"
    if q.sync_limit_ticks <= 0:
        return "syncLimit: must be set (in ticks) for an ensemble"
    return None


EXIT_CONFIG = 2
EXIT_DISK_FAILURE = 3
EXIT_BAD_DATA_DIR = 4


def _fault_plan(specs: tuple[str, ...]) -> FaultPlan | None:
    """Fault points for the crash and disk-full tests; never set in production."""
    if not specs:
        return None
    values: dict[str, object] = {}
    for spec in specs:
        name, _, arg = spec.partition("=")
        try:
            if name == "lose-unsynced":
                values["lose_unsynced"] = True
            elif name in ("enospc-after", "eio-after"):
                values["fail_after_bytes"] = int(arg)
                values["fail_errno"] = errno.ENOSPC if name == "enospc-after" else errno.EIO
            elif name == "eio-on-sync":
                values["fail_sync_after"] = int(arg)
            else:
                raise ValueError(name)
        except ValueError:
            click.echo(f"zkpy: unknown --fault {spec!r}", err=True)
            sys.exit(EXIT_CONFIG)
    logging.getLogger("zkpy").warning("disk fault points active: %s", ", ".join(specs))
    return FaultPlan(**values)  # type: ignore[arg-type]


def _run(config: ServerConfig, faults: FaultPlan | None = None) -> None:
    from zkpy.runtime.server import DiskFailure, serve
    from zkpy.storage.recovery import RecoveryError
    from zkpy.storage.snapshot import SnapshotError
    from zkpy.storage.txnlog import CorruptLogError

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if config.quorum is not None and config.quorum.is_ensemble:
            from zkpy.runtime.peer import serve_quorum

            await serve_quorum(config, stop, faults)
        else:
            await serve(config, stop, faults)

    try:
        try:
            import uvloop
        except ImportError:
            asyncio.run(runner())
        else:
            uvloop.run(runner())
    except DiskFailure as exc:
        click.echo(f"zkpy: stopped: cannot write the txn log: {exc}", err=True)
        sys.exit(EXIT_DISK_FAILURE)
    except (RecoveryError, CorruptLogError, SnapshotError) as exc:
        click.echo(f"zkpy: refusing to start: {exc}", err=True)
        sys.exit(EXIT_BAD_DATA_DIR)
    except OSError as exc:
        # e.g. the client port is taken: one clear line, not a traceback
        click.echo(f"zkpy: cannot serve on {config.client_port_address}:{config.client_port}: {exc.strerror or exc}",
                   err=True)
        sys.exit(1)


main.add_command(purge)
main.add_command(logdump)
main.add_command(snapdump)
main.add_command(ensemble)

if __name__ == "__main__":
    main()
