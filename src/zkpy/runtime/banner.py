"""The one "serving" line a server logs once its client port listens (standalone or ensemble member)."""

from __future__ import annotations

import os

from zkpy.config import ServerConfig


def serving_line(config: ServerConfig, client_port: int, admin_port: int | None = None) -> str:
    """``serving: dataDir /abs, client port HOST:PORT[, admin port PORT]``; the AdminServer passes its
    bound port as ``admin_port`` once it listens (None: not enabled)."""
    data = os.path.abspath(config.data_dir)
    logs = f", dataLogDir {os.path.abspath(config.data_log_dir)}" if config.data_log_dir else ""
    admin = f", admin port {admin_port}" if admin_port is not None else ""
    return f"serving: dataDir {data}{logs}, client port {config.client_port_address}:{client_port}{admin}"
