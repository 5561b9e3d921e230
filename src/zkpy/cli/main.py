"""``zkpy``: run a server (flags or zoo.cfg) and the operator tools."""

from __future__ import annotations

import asyncio
import errno
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import platform
import signal
import sys
from collections.abc import Mapping

import click

from zkpy import __version__
from zkpy.cli.ensemble import ensemble
from zkpy.cli.jvmflags import as_zoo_cfg, system_properties
from zkpy.cli.jvmflags import others as jvm_others
from zkpy.cli.security_keys import JAAS_KEY
from zkpy.cli.zoocfg import ConfigError, load_zoo_cfg
from zkpy.config import ServerConfig
from zkpy.storage.disk import FaultPlan


class _Commands(click.Group):
    """zkpy's commands. The operator tools' modules are imported only when their command is
    asked for, so a server's start does not load the client, the shell or the export code."""

    LAZY = {"purge": ("zkpy.cli.storage_tools", "purge"), "logdump": ("zkpy.cli.storage_tools", "logdump"),
            "snapdump": ("zkpy.cli.storage_tools", "snapdump"), "export": ("zkpy.cli.export", "export_command"),
            "import": ("zkpy.cli.export", "import_command"), "shell": ("zkpy.cli.shell", "shell"),
            "probe": ("zkpy.cli.probe", "probe")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self.LAZY:
            module, attr = self.LAZY[cmd_name]
            command = getattr(importlib.import_module(module), attr)
            assert isinstance(command, click.Command)
        return command


def event_loop_name() -> str:
    """The event loop a server process runs on: uvloop where it is installed (a dependency where
    it exists), else asyncio's own."""
    if importlib.util.find_spec("uvloop") is None:
        return "asyncio (uvloop is not installed)"
    try:
        return f"uvloop {importlib.metadata.version('uvloop')}"
    except importlib.metadata.PackageNotFoundError:
        return "uvloop"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"zkpy, version {__version__}")
    click.echo(f"event loop: {event_loop_name()}")
    click.echo(f"python: {platform.python_implementation()} {platform.python_version()}")
    ctx.exit()


@click.group(cls=_Commands)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version, the event loop and Python, and exit.")
def main() -> None:
    """zkpy: ZooKeeper in Python."""


ACTIONS = ("start", "stop", "status", "restart")


@main.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("args", nargs=-1, metavar="[start|stop|status|restart] [ZOO_CFG]")
@click.option("--port", "client_port", type=int, help="clientPort (default 2181)")
@click.option("--address", "client_port_address", help="clientPortAddress (default 127.0.0.1)")
@click.option("--data-dir", "data_dir", help="dataDir (default ./zkpy-data)")
@click.option("--tick-ms", "tick_ms", type=int, help="tickTime in ms (default 2000)")
@click.option("--server-workers", "server_workers", metavar="N|auto",
              help="serverWorkers: processes serving the client port (default 1; auto: one per CPU; "
                   "with 2 or more, a dedicated member process serves none)")
@click.option("--4lw", "four_letter_words", help="4lw.commands.whitelist, comma separated ('*' for all)")
@click.option("--extended-types/--no-extended-types", default=None, help="enable TTL nodes (extendedTypesEnabled)")
@click.option("--enforce-quota/--no-enforce-quota", default=None,
              help="hard quotas refuse writes with QuotaExceeded (enforceQuota)")
@click.option("--log-level", "log_levels", multiple=True, metavar="[LOGGER=]LEVEL",
              help="root level (default INFO), or one logger's, e.g. zkpy.election=DEBUG (repeatable)")
@click.option("--log-dir", help="write the log to DIR/zkpy-server.log, rotated (zookeeper.log.dir)")
@click.option("--log-file", help="the log file's name in --log-dir (or an absolute path)")
@click.option("--log-max-bytes", type=int, help="rotate the log file at this size (default 10 MiB)")
@click.option("--log-backups", type=int, help="rotated log files kept (default 10)")
@click.option("--log-format", default="text", show_default=True, help="text, or json (one object a line)")
@click.option("--wait-s", type=float, default=30.0, show_default=True,
              help="start/stop: how long to wait for the server to answer / to end")
@click.option("--from-env", "from_env", is_flag=True,
              help="run as the official zookeeper image's entrypoint: zoo.cfg and myid from its ZOO_* "
                   "variables where none is mounted; the ports on every address (in a container only)")
@click.option("--fault", "faults", multiple=True, hidden=True,
              help="test-only disk fault: lose-unsynced, enospc-after=BYTES, eio-after=BYTES, eio-on-sync=N")
def server(args: tuple[str, ...], log_levels: tuple[str, ...], log_dir: str | None, log_file: str | None,
           log_max_bytes: int | None, log_backups: int | None, log_format: str, wait_s: float,
           from_env: bool, faults: tuple[str, ...], **flags: object) -> None:
    """Run a server in the foreground, configured by ZOO_CFG and/or flags (flags win); or control
    one as a daemon with a pid file in its dataDir: start, stop, status, restart (as zkServer.sh)."""
    action = args[0] if args and args[0] in ACTIONS else None
    rest = args[1:] if action else args
    if len(rest) > 1:
        click.echo(f"zkpy: server takes one ZOO_CFG, got {' '.join(rest)}", err=True)
        sys.exit(EXIT_CONFIG)
    zoo_cfg = rest[0] if rest else None
    defaults: dict[str, str] = {}
    if from_env:
        if action is not None or zoo_cfg is not None:
            click.echo("zkpy: --from-env runs the server in the foreground from ZOO_CONF_DIR/zoo.cfg: "
                       "give no action and no ZOO_CFG", err=True)
            sys.exit(EXIT_CONFIG)
        zoo_cfg, defaults = _from_env()
    from zkpy.cli.logsetup import LogSetupError, configure, parse_settings

    try:
        log_settings = parse_settings(log_levels, log_dir, log_file, log_max_bytes, log_backups, log_format)
    except LogSetupError as exc:
        click.echo(f"zkpy: {exc}", err=True)
        sys.exit(EXIT_CONFIG)
    if action in ("stop", "status"):
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        _control(action, _config(zoo_cfg, flags, quiet=True), wait_s)
        return
    if action is None:
        try:
            configure(log_settings)
        except LogSetupError as exc:
            click.echo(f"zkpy: {exc}", err=True)
            sys.exit(EXIT_CONFIG)
    else:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    config = _config(zoo_cfg, flags, defaults=defaults)
    if action is not None:
        from zkpy.cli.service import ServiceError, alive, pid_path, read_pid, start, stop

        try:
            pid = read_pid(pid_path(config))
            if pid is not None and alive(pid):
                if action == "start":
                    raise ServiceError(f"already running as process {pid} ({pid_path(config)})")
                click.echo(stop(config, wait_s))
            _preflight(config)
            click.echo(start(config, _server_argv(click.get_current_context()), log_dir, wait_s))
        except ServiceError as exc:
            click.echo(f"zkpy: {exc}", err=True)
            sys.exit(1)
        return
    _preflight(config)
    _run(config, _fault_plan(faults))


def _server_argv(ctx: click.Context) -> list[str]:
    """The command line of this ``zkpy server`` run less its action: what the daemon runs."""
    argv: list[str] = []
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if isinstance(param, click.Argument):
            argv.extend(os.path.abspath(a) for a in (value or ())[1:])  # the action is first; the daemon runs from elsewhere
            continue
        if not isinstance(param, click.Option) or value is None or param.name == "wait_s":
            continue
        if param.is_flag and param.secondary_opts:
            argv.append(param.opts[0] if value else param.secondary_opts[0])
        elif param.is_flag:
            argv += [param.opts[0]] if value else []
        elif param.multiple:
            for v in value:
                argv += [param.opts[0], str(v)]
        elif param.name in ("data_dir", "log_dir") or (param.name == "log_file" and os.sep in str(value)):
            argv += [param.opts[0], os.path.abspath(str(value))]
        else:
            argv += [param.opts[0], str(value)]
    return argv


def _control(action: str, config: ServerConfig, wait_s: float) -> None:
    from zkpy.cli.service import ServiceError, status, stop

    if action == "status":
        code, line = status(config)
        click.echo(line, err=code != 0)
        sys.exit(code)
    try:
        click.echo(stop(config, wait_s))
    except ServiceError as exc:
        click.echo(f"zkpy: {exc}", err=True)
        sys.exit(1)


def _preflight(config: ServerConfig) -> None:
    """The start-up checks that need no reading or writing: one line and a non-zero exit each."""
    from zkpy.cli.preflight import data_dir_problem, port_problem

    for key, path in (("dataDir", config.data_dir), ("dataLogDir", config.data_log_dir)):
        problem = data_dir_problem(key, path) if path else None
        if problem is not None:
            click.echo(f"zkpy: {problem}", err=True)
            sys.exit(EXIT_BAD_DATA_DIR)
    for host, port, what in _listeners(config):
        problem = port_problem(host, port, what)
        if problem is not None:
            click.echo(f"zkpy: {problem}", err=True)
            sys.exit(EXIT_PORT)


def _listeners(config: ServerConfig) -> list[tuple[str, int, str]]:
    """The ports the server binds as it starts, each named as its start-up error names it (the
    quorum port is bound only while leading, as ZooKeeper binds it)."""
    ports = []
    if config.client_port_enabled:
        ports.append((config.client_port_address, config.client_port, "the client port"))
    if config.secure_client_port is not None:
        ports.append((config.secure_client_port_address or config.client_port_address, config.secure_client_port,
                      "the secure client port"))
    quorum = config.quorum
    me = quorum.me if quorum is not None and quorum.is_ensemble else None
    if quorum is not None and me is not None:
        ports.append((quorum.listen_host(), me.election_port, f"the election port of server.{me.sid}"))
    return ports


def _from_env() -> tuple[str, dict[str, str]]:
    """``--from-env``: the official image's files written where absent (``cli.container``); the
    zoo.cfg to run and the settings under its lines."""
    from zkpy.cli.container import CONTAINER_ADDRESSES, ContainerError, prepare

    try:
        prepared = prepare(os.environ)
    except ContainerError as exc:
        click.echo(f"zkpy: --from-env: {exc}", err=True)
        sys.exit(EXIT_CONFIG)
    except OSError as exc:
        from zkpy.runtime.osdisk import describe_error

        click.echo(f"zkpy: --from-env: {describe_error(exc)}", err=True)
        sys.exit(EXIT_BAD_DATA_DIR)
    for path in prepared.wrote:
        click.echo(f"zkpy: --from-env: wrote {path} from the ZOO_* variables", err=True)
    return prepared.zoo_cfg, dict(CONTAINER_ADDRESSES)


def _config(zoo_cfg: str | None, flags: dict[str, object], quiet: bool = False,
            defaults: Mapping[str, str] | None = None) -> ServerConfig:
    """The configuration from ZOO_CFG and the flags (flags win), checked; exits 2 with one line if
    bad. ``quiet`` (status, stop): without the WARNs about the config, which the server logged
    when it started. ``defaults``: zoo.cfg lines under the file's and the JVM flags' (--from-env)."""
    config_log = logging.getLogger("zkpy.config")
    level = config_log.level
    if quiet:
        config_log.setLevel(logging.ERROR)
    try:
        return _checked_config(zoo_cfg, flags, defaults or {})
    finally:
        config_log.setLevel(level)


def _checked_config(zoo_cfg: str | None, flags: dict[str, object], defaults: Mapping[str, str]) -> ServerConfig:
    from zkpy.cli.preflight import flag_problem

    problem = flag_problem(flags)
    if problem is not None:
        click.echo(f"zkpy: {problem}", err=True)
        sys.exit(EXIT_CONFIG)
    try:
        properties = system_properties(os.environ)
        jaas = properties.get(JAAS_KEY) or None
        address_flag = flags.get("client_port_address") is not None
        config = load_zoo_cfg(zoo_cfg, jaas_path=jaas, loopback_note=not address_flag,
                              flags=as_zoo_cfg(properties, defaults)) if zoo_cfg else ServerConfig()
        if ignored := jvm_others(os.environ, frozenset({JAAS_KEY})):
            logging.getLogger("zkpy.config").warning(
                "SERVER_JVMFLAGS/JVMFLAGS: %s: the JVM's (or other software's), no effect in zkpy", " ".join(ignored))
        if not zoo_cfg and (given := as_zoo_cfg(properties).taken({})):
            logging.getLogger("zkpy.config").warning(
                "SERVER_JVMFLAGS/JVMFLAGS: %s: read with a zoo.cfg only (zkpy server ZOO_CFG), as ZooKeeper runs "
                "with one", ", ".join(f"-D{flag}" for flag in given.values()))
        if not zoo_cfg and not address_flag:
            logging.getLogger("zkpy.config").warning(
                "no clientPortAddress (or --address): zkpy listens on 127.0.0.1 only; set clientPortAddress "
                "in zoo.cfg (or --address 0.0.0.0) for remote clients")
    except ConfigError as exc:
        click.echo(f"zkpy: {exc}", err=True)
        sys.exit(EXIT_CONFIG)
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
    if "server_workers" in overrides:
        from zkpy.cli.zoocfg import server_workers

        overrides["server_workers"] = server_workers("--server-workers", "", str(overrides["server_workers"]))
    if "four_letter_words" in overrides:
        overrides["four_letter_words"] = frozenset(w.strip() for w in str(overrides["four_letter_words"]).split(","))
    if overrides:
        from dataclasses import replace

        config = replace(config, **overrides)  # type: ignore[arg-type]
    return config


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
EXIT_BAD_DATA_DIR = 4  # also: the data dir cannot be used (not a directory, not writable)
EXIT_PORT = 1  # the client port cannot be bound


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
    from zkpy.cli.progress import RecoveryBar, progress_wanted
    from zkpy.runtime import gcpolicy
    from zkpy.runtime.server import DiskFailure, serve
    from zkpy.storage.recovery import RecoveryError
    from zkpy.storage.snapshot import SnapshotError
    from zkpy.storage.txnlog import CorruptLogError

    bar = RecoveryBar(progress_wanted(output_to_stdout=False))
    progress = bar if bar.enabled else None  # (a replay with a progress total counts the logs' txns first)

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if config.quorum is not None and config.quorum.is_ensemble:
            from zkpy.runtime.peer import serve_quorum

            await serve_quorum(config, stop, faults, recovery_progress=progress)
        else:
            await serve(config, stop, faults, recovery_progress=progress)

    gcpolicy.tune()
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
        from zkpy.runtime.listen_error import ListenError
        from zkpy.runtime.osdisk import describe_error

        if exc.filename:  # a data dir or file problem found late: its path and errno
            click.echo(f"zkpy: stopped: {describe_error(exc)}", err=True)
            sys.exit(EXIT_DISK_FAILURE)
        # a port taken after the checks (ListenError names which): one clear line, not a traceback
        click.echo(f"zkpy: {exc}" if isinstance(exc, ListenError) else f"zkpy: cannot serve: {describe_error(exc)}",
                   err=True)
        sys.exit(EXIT_PORT)


main.add_command(ensemble)

if __name__ == "__main__":
    main()
