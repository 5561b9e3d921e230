"""Reading a server's own counters: four-letter words, and group-commit figures from ``mntr``.

Both servers print ZooKeeper 3.8's metric names in ``mntr``:

* ``zk_cnt_fsynctime`` / ``zk_sum_fsynctime``: one sample per fsync of the txn log, in whole
  milliseconds (FileTxnLog.commit; zkpy's FsyncWorker), so the count is the number of fsyncs;
* ``zk_cnt_sync_processor_batch_size`` / ``zk_sum_...``: one sample per group commit, the
  number of requests it covered (ZooKeeper counts every request queued behind the fsync, reads
  included; zkpy counts txns).

The txns in a window are the difference of ``srvr``'s ``Zxid``: a standalone server gives every
txn the next zxid. So "txns per fsync" means the same thing for both servers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from zkpy.testing import servers


def four_letter(host: str, port: int, word: str, timeout: float = 10.0) -> str:
    """Send a four-letter word; return the whole answer."""
    return servers.four_letter(port, word, timeout, host)


def mntr(host: str, port: int) -> dict[str, str]:
    """``mntr`` as a dict of key to value (tab-separated lines)."""
    out = {}
    for line in four_letter(host, port, "mntr").splitlines():
        key, sep, value = line.partition("\t")
        if sep:
            out[key] = value
    return out


def srvr_zxid(host: str, port: int) -> int:
    for line in four_letter(host, port, "srvr").splitlines():
        if line.startswith("Zxid: "):
            return int(line.split()[1], 16)
    raise RuntimeError("srvr gave no Zxid")


@dataclass(frozen=True)
class CommitSample:
    """The group-commit counters at one instant (``at`` is time.monotonic())."""

    at: float
    zxid: int
    fsyncs: int  # zk_cnt_fsynctime
    fsync_ms: int  # zk_sum_fsynctime
    batches: int  # zk_cnt_sync_processor_batch_size
    batched: int  # zk_sum_sync_processor_batch_size

    @classmethod
    def take(cls, host: str, port: int) -> CommitSample:
        m = mntr(host, port)
        zxid = srvr_zxid(host, port)

        def num(key: str) -> int:
            return int(m.get(f"zk_{key}", "0"))

        return cls(time.monotonic(), zxid, num("cnt_fsynctime"), num("sum_fsynctime"),
                   num("cnt_sync_processor_batch_size"), num("sum_sync_processor_batch_size"))


@dataclass(frozen=True)
class CommitRates:
    """What the server's own counters say about a window: fsyncs/s and txns per fsync."""

    seconds: float
    txns: int
    fsyncs: int
    fsync_ms: int
    batches: int
    batched: int

    @classmethod
    def between(cls, a: CommitSample, b: CommitSample) -> CommitRates:
        return cls(b.at - a.at, b.zxid - a.zxid, b.fsyncs - a.fsyncs, b.fsync_ms - a.fsync_ms,
                   b.batches - a.batches, b.batched - a.batched)

    @property
    def fsyncs_per_s(self) -> float:
        return self.fsyncs / self.seconds if self.seconds > 0 else float("nan")

    @property
    def txns_per_fsync(self) -> float:
        return self.txns / self.fsyncs if self.fsyncs else float("nan")

    @property
    def requests_per_batch(self) -> float:
        """The server's own average batch (ZooKeeper counts reads queued with the writes too)."""
        return self.batched / self.batches if self.batches else float("nan")

    def as_dict(self) -> dict[str, float]:
        return {"seconds": self.seconds, "txns": self.txns, "fsyncs": self.fsyncs, "fsync_ms_sum": self.fsync_ms,
                "fsyncs_per_s": self.fsyncs_per_s, "txns_per_fsync": self.txns_per_fsync,
                "requests_per_batch": self.requests_per_batch}
