"""``zkpy probe live|ready``: a container's liveness and readiness probes, with no nc and no curl.

Both ask the client port with ``srvr`` (always answered by zkpy; in ZooKeeper 3.8's default
``4lw.commands.whitelist``). Exit status, for an ``exec`` probe or a script:

==  ==========================================================================================
0   live: the server answers. ready: it serves, as a standalone server or a synchronised
    member (leader, follower, observer) of an ensemble with a quorum
1   ready only: it answers but does not serve (starting, no quorum, read-only, or ``srvr`` not
    in its whitelist)
3   it does not answer (not running, not listening yet, or past ``--timeout``)
==  ==========================================================================================

(2 is click's: a usage error.) The verdict is ``admin.readiness``'s, as the AdminServer's
``/live`` and ``/ready`` give it to ``httpGet`` probes.
"""

from __future__ import annotations

import sys

import click

from zkpy.admin.fourletter import ask as ask_four_letter_word
from zkpy.admin.readiness import READY, verdict


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("kind", type=click.Choice(["live", "ready"]))
@click.option("--host", default="127.0.0.1", show_default=True, help="the client port's address")
@click.option("--port", type=click.IntRange(1, 65535), default=2181, show_default=True, help="the client port")
@click.option("--timeout", type=float, default=3.0, show_default=True, help="seconds to wait for the answer")
@click.option("--quiet", "-q", is_flag=True, help="print nothing; the exit status says it")
def probe(kind: str, host: str, port: int, timeout: float, quiet: bool) -> None:
    """Exit 0 when the server at HOST:PORT is live (answers) or ready (serves, in a quorum); 1 when
    it answers but is not ready; 3 when it does not answer."""
    try:
        answer: str | None = ask_four_letter_word(host, port, "srvr", timeout)
    except OSError:
        answer = None
    code, line = verdict(kind, answer)
    if not quiet:
        click.echo(f"{host}:{port}: {line}", err=code != READY)
    sys.exit(code)
