"""The AdminServer: ZooKeeper 3.8's HTTP commands (``admin.*`` keys) with aiohttp, on the server's loop.

``GET <commandURL>`` lists the commands as links (as Jetty's CommandServlet does);
``GET <commandURL>/<name>`` answers the command's JSON (``commands.run_command``), always with
status 200, an unknown name included (``{"command": name, "error": "Unknown command: name"}``);
query parameters are the command's arguments (``set_trace_mask?traceMask=N``). zkpy adds ``GET
/live`` and ``GET /ready`` for httpGet probes (200, or 503 when not: ``admin.readiness``). Anything
else is 404.

The server is bound to ``admin.serverAddress`` (zkpy's default: 127.0.0.1, where ZooKeeper
binds every address) and ``admin.serverPort``. With ``admin.forceHttps=true`` (ZooKeeper 3.9's key)
it serves HTTPS only, with the ``ssl.quorum.*`` key store when ``sslQuorum=true`` (the stores 3.8's
``admin.portUnification`` uses), else the client port's ``ssl.*`` one, asking no client certificate;
3.8's ``admin.portUnification`` (HTTP and HTTPS on one port) is not offered. A port that cannot be
bound costs one log line and the server goes on serving clients without it: ZooKeeper 3.8's ensemble
member does the same, its standalone server exits (code 4) instead.
"""

from __future__ import annotations

import json
import logging
import ssl
from typing import TYPE_CHECKING

from .commands import PRIMARY_NAMES, run_command
from .fourletter import answer as answer_four_letter_word
from .readiness import READY, verdict
from .view import ServerView

if TYPE_CHECKING:  # aiohttp (0.2 s to import) and the TLS stores load only when the server starts
    from aiohttp import web

log = logging.getLogger("zkpy.admin")


def _json(fields: dict[str, object]) -> web.Response:
    from aiohttp import web

    return web.Response(text=json.dumps(fields, indent=2), content_type="application/json")


def make_app(server: ServerView) -> web.Application:
    """The aiohttp application answering ``server``'s commands under its ``admin.commandURL``."""
    base = "/" + server.config.admin_command_url.strip("/")
    base = "" if base == "/" else base
    from aiohttp import web

    async def listing(request: web.Request) -> web.Response:
        links = "".join(f'<a href="{base}/{name}">{name}</a>\n<br/>\n' for name in PRIMARY_NAMES)
        return web.Response(text=links, content_type="text/html")

    async def command(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return _json(run_command(name, server, dict(request.query)))

    async def probe(request: web.Request) -> web.Response:
        """``/live`` and ``/ready`` for httpGet probes: 200 when so, 503 when not (zkpy's own
        paths, beside ZooKeeper's commands; ``admin.readiness``)."""
        kind = request.path.rsplit("/", 1)[1]
        code, line = verdict(kind, answer_four_letter_word("srvr", server))
        return web.Response(text=line + "\n", status=200 if code == READY else 503)

    app = web.Application()
    app.router.add_get("/live", probe)
    app.router.add_get("/ready", probe)
    app.router.add_get(base or "/", listing)
    if base:
        app.router.add_get(base + "/", listing)
    app.router.add_get(base + "/{name}", command)
    return app


class AdminServer:
    """Started after the client port listens, stopped at shutdown, by both runtimes."""

    def __init__(self, server: ServerView) -> None:
        self.server = server
        self.runner: web.AppRunner | None = None
        self.port: int | None = None  # the bound port once started

    async def start(self) -> None:
        cfg = self.server.config
        if not cfg.admin_enabled:
            return
        from aiohttp import web

        context: ssl.SSLContext | None = None
        if cfg.admin_force_https:
            from .tls import TlsConfigError, server_context

            tls, prefix = (cfg.quorum_tls, "ssl.quorum.") if cfg.quorum_tls is not None else (cfg.tls, "ssl.")
            if tls is None:
                log.error("admin.forceHttps=true needs a key store (ssl.quorum.keyStore.* with sslQuorum=true, "
                          "or ssl.keyStore.*): AdminServer not started")
                return
            try:
                context = server_context(tls, prefix)
            except TlsConfigError as exc:
                log.error("AdminServer not started: %s", exc)
                return
            context.verify_mode = ssl.CERT_NONE  # the admin port asks for no client certificate
        runner = web.AppRunner(make_app(self.server), handle_signals=False, access_log=None,
                               keepalive_timeout=cfg.admin_idle_timeout_ms / 1000)
        await runner.setup()
        site = web.TCPSite(runner, cfg.admin_address, cfg.admin_port, ssl_context=context, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            log.error("AdminServer cannot listen on %s:%d (%s): serving without it", cfg.admin_address,
                      cfg.admin_port, exc.strerror or exc)
            await runner.cleanup()
            return
        self.runner = runner
        self.port = cfg.admin_port
        log.info("AdminServer on %s://%s:%d%s", "https" if context else "http", cfg.admin_address, self.port,
                 cfg.admin_command_url)

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
