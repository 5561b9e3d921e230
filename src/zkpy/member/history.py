"""What one term hands the next: the tree it ended with and its recent txns.

A ``History`` is the tree a term ends with, every txn it logged applied (ZooKeeper's
fastForwardDataBase), and its recent committed txns (a new leader's committed log, for DIFF).
Taking it instead of recovering from disk is only right when the tree and the data dir agree:
each core says whether it does (``carry_over``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zkpy.quorum.sync import LoggedTxn
from zkpy.storage.recovery import Recovered
from zkpy.storage.txnlog import encode_payload
from zkpy.tree.datatree import DataTree


@dataclass(slots=True)
class History:
    tree: DataTree
    committed: list[LoggedTxn]
    carried: list[LoggedTxn] = field(default_factory=list)  # applied at the hand-over (the simulator checks them)

    @classmethod
    def of(cls, recovered: Recovered) -> History:
        """The history of a recovered data dir: its tree and the txns replayed at the end."""
        return cls(recovered.tree, [LoggedTxn(h.zxid, encode_payload(h, t)) for h, t in recovered.replayed_tail])
