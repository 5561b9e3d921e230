"""Operator tools for the data directories: ``zkpy purge``, ``zkpy logdump``, ``zkpy snapdump``.

They read the same files ZooKeeper 3.8 writes, so they work on Apache ZooKeeper's data dirs
too (PurgeTxnLog, TxnLogToolkit and SnapshotFormatter are the Java counterparts).

logdump and snapdump print to stdout only what they dump: a progress bar is drawn on stderr, and
only when stderr is a terminal and stdout is not (``zkpy logdump LOG > out.txt``).
"""

from __future__ import annotations

import os
import sys

import click

from zkpy.cli.progress import ProgressBar, progress_wanted
from zkpy.runtime.osdisk import OsDisk
from zkpy.storage.files import DataDirs
from zkpy.storage.files import purge as purge_files
from zkpy.storage.snapshot import SnapshotError, describe_snapshot, load_snapshot
from zkpy.storage.txnlog import CorruptLogError, describe_entry, scan_log


@click.command()
@click.argument("data_dir", type=click.Path(file_okay=False, exists=True))
@click.argument("data_log_dir", required=False, type=click.Path(file_okay=False, exists=True))
@click.option("-n", "--count", default=3, show_default=True, help="snapshots to keep (at least 3)")
def purge(data_dir: str, data_log_dir: str | None, count: int) -> None:
    """Delete all but the COUNT newest snapshots and the logs they do not need (zkCleanup.sh).

    DATA_DIR and DATA_LOG_DIR are dataDir and dataLogDir (the folders that hold version-2/);
    do it while the server runs or not, as with ZooKeeper."""
    if count < 3:
        raise click.BadParameter("must be at least 3", param_hint="--count")
    for path in purge_files(OsDisk(), DataDirs.of(data_dir, data_log_dir), count):
        click.echo(f"removed {path}")


@click.command()
@click.argument("log_file", type=click.Path(dir_okay=False, exists=True))
def logdump(log_file: str) -> None:
    """Print every txn of a txn log file, one line each (TxnLogToolkit)."""
    data = OsDisk().read(log_file)
    try:
        scan = scan_log(log_file, data)
    except CorruptLogError as exc:
        click.echo(f"zkpy: {exc}", err=True)
        sys.exit(1)
    if not scan.header_ok:
        click.echo(f"zkpy: {log_file}: not a ZooKeeper txn log (bad or missing header)", err=True)
        sys.exit(1)
    click.echo(f"ZooKeeper Transactional Log File with dbid 0 txnlog format version 2 ({os.path.basename(log_file)})")
    total = len(scan.entries)
    with ProgressBar("txns", progress_wanted(output_to_stdout=True), total) as bar:
        for n, entry in enumerate(scan.entries, 1):
            click.echo(describe_entry(entry))
            bar.update(n, total)
    click.echo(f"EOF reached after {len(scan.entries)} txns.")
    if scan.torn:
        click.echo(f"torn tail after offset {scan.good_end}: the server truncates it on its next start")


@click.command()
@click.argument("snapshot_file", type=click.Path(dir_okay=False, exists=True))
def snapdump(snapshot_file: str) -> None:
    """Print the znodes, sessions and digest of a snapshot file (SnapshotFormatter)."""
    data = OsDisk().read(snapshot_file)
    try:
        loaded = load_snapshot(os.path.basename(snapshot_file), data)
    except SnapshotError as exc:
        click.echo(f"zkpy: {exc}", err=True)
        sys.exit(1)
    lines = list(describe_snapshot(loaded))
    with ProgressBar("lines", progress_wanted(output_to_stdout=True), len(lines)) as bar:
        for n, line in enumerate(lines, 1):
            click.echo(line)
            bar.update(n, len(lines))
