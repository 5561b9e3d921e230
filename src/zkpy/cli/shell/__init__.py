"""``zkpy shell``: zkCli.sh's commands on zkpy's own client, with no JVM.

``parse`` is the pure grammar and formatting, ``session`` runs commands against a session
(``quota`` the quota commands), ``output`` prints text or JSON, ``repl`` is the interactive
prompt_toolkit front end. This module is the click command:

- interactive when stdin is a terminal (completion, history, watch events as they arrive): the
  prompt comes at once and the client keeps trying to connect until a server accepts the
  session, as zkCli's does;
- ``-c CMD`` (repeatable) runs those commands and prints their output only (no connection
  events), a non-terminal stdin runs its lines as a script (with zkCli's output, events included);
  exit status 0 when every command succeeded, 1 when one failed (the rest still run), 2 when
  the shell could not connect;
- ``--json``: one JSON document per command and per watch event, on stdout.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import click

from .output import Output
from .parse import CommandFailed, Quit
from .session import Shell

EXIT_OK, EXIT_FAILED, EXIT_NOT_CONNECTED = 0, 1, 2


def run_script(shell: Shell, lines: Iterable[str]) -> int:
    """Run lines in order as they come (a pipe is read line by line); the exit status (1 if
    any failed)."""
    status = EXIT_OK
    try:
        for line in lines:
            if not shell.execute(line.rstrip("\r\n")):
                status = EXIT_FAILED
    except Quit:
        shell.drain()
        shell.close_session()
        return status
    shell.drain()
    return status


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("connect_string", required=False, metavar="[CONNECT-STRING]")
@click.option("-server", "--server", "server", metavar="HOSTS",
              help="the connect string, as zkCli.sh's -server (default 127.0.0.1:2181)")
@click.option("-r", "--read-only", is_flag=True, help="accept a read-only server (zkCli.sh's -r)")
@click.option("-c", "--command", "commands", multiple=True, metavar="CMD",
              help="run this command (repeatable) and exit instead of reading commands")
@click.option("--json", "json_mode", is_flag=True, help="one JSON document per command and per watch event")
@click.option("--timeout", "session_timeout", type=float, default=30.0, show_default=True,
              help="session timeout in seconds")
@click.option("--connect-timeout", type=float, default=15.0, show_default=True,
              help="give up connecting after this many seconds")
def shell(connect_string: str | None, server: str | None, read_only: bool, commands: tuple[str, ...],
          json_mode: bool, session_timeout: float, connect_timeout: float) -> None:
    """A ZooKeeper shell with zkCli.sh's commands (help: any unknown command lists them).

    Interactive on a terminal; otherwise runs -c commands or the lines of stdin, and exits 1 if
    a command failed, 2 if no server accepted the session."""
    if connect_string and server and connect_string != server:
        raise click.UsageError("give the connect string once (as an argument or with -server)")
    connect_string = connect_string or server or "127.0.0.1:2181"
    output = Output(json_mode=json_mode)
    # -c's output is the commands' alone (data a caller can capture): no connection events
    output.state_events = not commands
    sh = Shell(connect_string, output, session_timeout=session_timeout, connect_timeout=connect_timeout,
               read_only=read_only)
    interactive = not commands and sys.stdin.isatty() and not json_mode
    sh.keep_trying = interactive  # zkCli prompts at once and keeps reconnecting; a script needs the session first
    if not json_mode and not commands:
        output.line(f"Connecting to {connect_string}")
    try:
        sh.connect()
    except CommandFailed as exc:
        output.line(str(exc), error=True)
        if json_mode:
            output.document({"command": None, "ok": False, "error": {"code": exc.code, "message": str(exc)},
                             "output": output.take_lines()})
        if not interactive:
            sys.exit(EXIT_NOT_CONNECTED)
    if interactive:
        from .repl import run_interactive

        sys.exit(run_interactive(sh))
    status = run_script(sh, commands if commands else sys.stdin)
    _quiet_close(sh)
    sys.exit(status)


def _quiet_close(sh: Shell) -> None:
    """End the session at the end of a script without printing its Closed event (zkCli.sh
    exits at the end of its input without closing; a script's output ends with its last result)."""
    sh.output.print_watches = False
    sh.close_session()
