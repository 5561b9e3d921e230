"""A member's data dir at the two points its lifecycle reads it (pure, over a ``Disk``).

Both shells (``runtime.peer`` on the OS, ``testing.sim.node`` in simulation) run these when the
member core asks (`Recover`) or a learner's term core does (`Truncate`), so the sequence of disk
steps exists once:

* ``recover_data_dir``: before an election, the tree and the epochs. Unless the last term
  carried its tree over (``History``), the data dir is recovered (snapshot + every logged txn,
  committed or not); txns of an epoch whose NEWLEADER was never acknowledged are dropped and
  the dir recovered again (``storage.truncate.drop_unadopted_epoch``); a fresh data dir gets
  ``snapshot.0`` (ZooKeeper's loader refuses logs without a snapshot). Then the epoch files are
  read (``storage.epochs.load_epochs``: written where missing, a pending currentEpoch adopted).
* ``truncate_data_dir``: a learner's TRUNC: every txn after the zxid leaves the logs
  (``storage.truncate.truncate_to``), and the dir is recovered, so the uncommitted txns leave the
  tree too (ZOOKEEPER-1154). The caller closes its log before and opens a new one after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zkpy.storage.disk import Disk
from zkpy.storage.epochs import Epochs, load_epochs
from zkpy.storage.files import DataDirs
from zkpy.storage.recovery import Progress, Recovered, recover
from zkpy.storage.snapshot import DigestApart, write_snapshot_file
from zkpy.storage.truncate import drop_unadopted_epoch, truncate_to

from .history import History

Log = Callable[[str], None]


@dataclass(slots=True)
class DataDirState:
    """What a member reads before an election: the history to elect with and to start the next
    term from, the epochs, and what the recovery did (for logs and the simulator's checks)."""

    history: History
    epochs: Epochs
    recovered: Recovered | None = None  # None: the last term's history was carried over, nothing recovered
    dropped_epoch: int | None = None  # the unadopted epoch whose txns were dropped
    fresh_snapshot: str | None = None  # the path of the snapshot.0 a fresh data dir got


def recover_data_dir(disk: Disk, dirs: DataDirs, carried: History | None, *, log: Log = lambda _m: None,
                     warn: Log | None = None, progress: Progress | None = None,
                     digest_apart: DigestApart | None = None) -> DataDirState:
    """The history and epochs before an election (see the module doc); ``carried``: the last
    term's history, taken instead of a recovery. ``progress`` and ``digest_apart`` go to
    ``recover`` (the first recovery's report, the digest summed apart)."""
    state = DataDirState(carried, Epochs(0, 0)) if carried is not None else _recover(
        disk, dirs, log, warn or log, progress, digest_apart)
    state.epochs = load_epochs(disk, dirs.snap_dir, state.history.tree.last_processed_zxid, log)
    return state


def _recover(disk: Disk, dirs: DataDirs, log: Log, warn: Log, progress: Progress | None,
             digest_apart: DigestApart | None) -> DataDirState:
    for directory in (dirs.snap_dir, dirs.log_dir):
        disk.makedirs(directory)
    recovered = recover(disk, dirs, log, progress, digest_apart)
    dropped = drop_unadopted_epoch(disk, dirs, recovered.tree.last_processed_zxid, warn)
    if dropped is not None:
        recovered = recover(disk, dirs, log)
    fresh = write_snapshot_file(disk, dirs.snap_dir, recovered.tree) if recovered.fresh else None
    return DataDirState(History.of(recovered), Epochs(0, 0), recovered, dropped, fresh)


def truncate_data_dir(disk: Disk, dirs: DataDirs, zxid: int, log: Log = lambda _m: None) -> Recovered:
    """TRUNC: drop every txn after ``zxid`` and recover what is left (see the module doc)."""
    truncate_to(disk, dirs, zxid, log)
    return recover(disk, dirs, log)
