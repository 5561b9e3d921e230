"""Writing an active config as ZooKeeper 3.8 writes it (QuorumPeer.setQuorumVerifier with
writeToDisk, QuorumPeerConfig.writeDynamicConfig and editStaticConfig).

Beside the static zoo.cfg: ``zoo.cfg.dynamic.<hex version>`` holds the server lines (no version
line); zoo.cfg then names it in ``dynamicConfigFile`` and holds no server lines, nor the
clientPort/clientPortAddress that this server's line now carries. The first time (a zoo.cfg with
its server lines in it), the original is kept as ``zoo.cfg.bak``. Each file is written to a
temporary name, fsynced and renamed, so a crash leaves the old file or the new one, never half.
"""

from __future__ import annotations

import os

from zkpy.config import QuorumConfig
from zkpy.quorum.dynconfig import dynamic_file_name, dynamic_file_text, static_file_text
from zkpy.runtime.osdisk import write_text_atomically


def write_dynamic_config(quorum: QuorumConfig) -> str:
    """Write ``quorum`` as the dynamic config file beside its static file
    (``QuorumConfig.static_path``) and point the
    static file at it; the dynamic file's path."""
    static = quorum.static_path
    dynamic = dynamic_file_name(static, quorum.config_version)
    write_text_atomically(dynamic, dynamic_file_text(quorum))
    with open(static, encoding="utf-8") as f:
        text = f.read()
    if "dynamicConfigFile" not in text and not os.path.exists(static + ".bak"):
        write_text_atomically(static + ".bak", text)
    write_text_atomically(static, static_file_text(text, dynamic, quorum.me))
    return dynamic
