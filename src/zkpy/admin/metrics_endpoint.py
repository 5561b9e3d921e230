"""The ``/metrics`` endpoint a server's runtime shell holds (ZooKeeper's PrometheusMetricsProvider).

It lives apart from ``admin.prometheus``, which formats the figures, so that a server whose
zoo.cfg does not name the provider never imports prometheus_client (50 ms of every start) or
aiohttp."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .view import ServerView

if TYPE_CHECKING:  # aiohttp (0.2 s to import) loads only when the endpoint starts
    from aiohttp import web

log = logging.getLogger("zkpy.metrics")


class MetricsEndpoint:
    """``/metrics`` on the server's loop, while ``metricsProvider.className`` names the Prometheus provider."""

    def __init__(self, server: ServerView) -> None:
        self.server = server
        self.runner: web.AppRunner | None = None

    async def start(self) -> None:
        cfg = self.server.config
        if not cfg.metrics_prometheus:
            return
        from aiohttp import web
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        from .prometheus import registry_for

        registry = registry_for(self.server)

        async def metrics(request: web.Request) -> web.Response:
            body = generate_latest(registry)
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/", metrics)  # ZooKeeper's provider answers on any path
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, cfg.metrics_http_host, cfg.metrics_http_port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            log.error("cannot serve Prometheus metrics on %s:%d: %s", cfg.metrics_http_host,
                      cfg.metrics_http_port, exc.strerror or exc)
            return
        self.runner = runner
        log.info("Prometheus metrics on http://%s:%d/metrics", cfg.metrics_http_host, cfg.metrics_http_port)

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
