"""``zkpy``: run a server (flags or zoo.cfg) and the operator tools."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import click

from zkpy.cli.zoocfg import ConfigError, load_zoo_cfg
from zkpy.config import ServerConfig


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
def server(zoo_cfg: str | None, log_level: str, **flags: object) -> None:
    """Run a standalone server, configured by ZOO_CFG and/or flags (flags win)."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_zoo_cfg(zoo_cfg) if zoo_cfg else ServerConfig()
    except ConfigError as exc:
        click.echo(f"zkpy: {exc}", err=True)
        sys.exit(2)
    overrides = {k: v for k, v in flags.items() if v is not None}
    if "four_letter_words" in overrides:
        overrides["four_letter_words"] = frozenset(w.strip() for w in str(overrides["four_letter_words"]).split(","))
    if overrides:
        from dataclasses import replace

        config = replace(config, **overrides)  # type: ignore[arg-type]
    _run(config)


def _run(config: ServerConfig) -> None:
    from zkpy.runtime.server import serve

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(config, stop)

    try:
        try:
            import uvloop
        except ImportError:
            asyncio.run(runner())
        else:
            uvloop.run(runner())
    except OSError as exc:
        # e.g. the client port is taken: one clear line, not a traceback
        click.echo(f"zkpy: cannot serve on {config.client_port_address}:{config.client_port}: {exc.strerror or exc}",
                   err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
