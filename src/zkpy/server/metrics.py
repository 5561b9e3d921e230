"""ZooKeeper 3.8's server metrics (ServerMetrics) as plain figures: one registry behind ``mntr``,
the AdminServer's ``monitor`` and the Prometheus endpoint, so the three agree by construction.

The request path only adds to ints and appends to a bounded list; formatting, quantiles and
the Prometheus types are computed when someone asks. Names are ZooKeeper's, without ``zk_``.
"""

from __future__ import annotations

# Counters (ServerMetrics' SimpleCounter), in the order 3.8's mntr prints them.
COUNTERS: tuple[str, ...] = (
    "proposal_count", "watch_bytes", "outstanding_changes_removed", "throttled_ops", "stale_requests_dropped",
    "large_requests_rejected", "insecure_admin_count", "connection_rejected",
    "cnxn_closed_without_zk_server_running", "sessionless_connections_expired", "looking_count",
    "dead_watchers_queued", "stale_requests", "connection_drop_count", "learner_proposal_received_count",
    "digest_mismatches_count", "dead_watchers_cleared", "response_packet_cache_hits", "bytes_received_count",
    "add_dead_watcher_stall_time", "request_throttle_wait_count", "requests_not_forwarded_to_commit_processor",
    "response_packet_cache_misses", "ensemble_auth_success", "prep_processor_request_queued",
    "learner_commit_received_count", "stale_replies", "connection_request_count", "response_bytes",
    "ensemble_auth_fail", "diff_count", "response_packet_get_children_cache_misses", "connection_revalidate_count",
    "quit_leading_due_to_disloyal_voter", "snap_count", "unrecoverable_error_count", "unsuccessful_handshake",
    "commit_count", "stale_sessions_expired", "response_packet_get_children_cache_hits",
    "sync_processor_request_queued", "outstanding_changes_queued", "request_commit_queued", "ensemble_auth_skip",
    "skip_learner_request_to_next_processor_count", "tls_handshake_exceeded", "revalidate_count",
)

# Summaries with quantiles (ZooKeeper's DETAILED: avg, min, max, cnt, sum, p50, p95, p99, p999).
DETAILED: tuple[str, ...] = (
    "close_session_prep_time", "commit_propagation_latency", "dead_watchers_cleaner_latency",
    "local_write_committed_time_ms", "om_commit_process_time_ms", "om_proposal_process_time_ms",
    "prep_processor_queue_time_ms", "propagation_latency", "proposal_ack_creation_latency", "proposal_latency",
    "quorum_ack_latency", "read_commitproc_time_ms", "read_final_proc_time_ms", "readlatency",
    "request_throttle_queue_time_ms", "server_write_committed_time_ms", "sync_processor_queue_and_flush_time_ms",
    "sync_processor_queue_flush_time_ms", "sync_processor_queue_time_ms", "updatelatency",
    "write_commitproc_time_ms", "write_final_proc_time_ms",
)

# Summaries without quantiles (BASIC: avg, min, max, cnt, sum).
BASIC: tuple[str, ...] = (
    "commit_commit_proc_req_queued", "commit_process_time",
    "concurrent_request_processing_in_commit_processor", "connection_token_deficit", "dbinittime",
    "election_time", "follower_sync_time", "inflight_diff_count", "inflight_snap_count",
    "leader_unavailable_time", "learner_request_processor_queue_size", "node_changed_watch_count",
    "node_children_watch_count", "node_created_watch_count", "node_deleted_watch_count", "observer_sync_time",
    "pending_session_queue_size", "prep_process_time", "prep_processor_queue_size", "proposal_process_time",
    "read_commit_proc_issued", "read_commit_proc_req_queued", "reads_after_write_in_session_queue",
    "reads_issued_from_session_queue", "requests_in_session_queue", "session_queues_drained", "snapshottime",
    "socket_closing_time", "startup_snap_load_time", "startup_txns_load_time", "startup_txns_loaded",
    "sync_process_time", "sync_processor_batch_size", "sync_processor_queue_size",
    "time_waiting_empty_pool_in_commit_processor_read_ms", "unavailable_time", "write_batch_time_in_commit_processor",
    "write_commit_proc_issued", "write_commit_proc_req_queued",
)

# the summary of watchers fired per event type (WatchManager.triggerWatch), by the event's type number
WATCH_FIRED: dict[int, str] = {1: "node_created_watch_count", 2: "node_deleted_watch_count",
                               3: "node_changed_watch_count", 4: "node_children_watch_count"}

QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999))
RESERVOIR = 1028  # the samples a quantile summary keeps (the size of ZooKeeper's reservoir)
FOLD_AT = 1024  # values a summary holds unfolded at most


class Summary:
    """count, sum, min and max of the values seen (AvgMinMaxCounter), and the last ``RESERVOIR``
    values, from which the quantiles are read (mntr prints them for a ``detailed`` one; the
    Prometheus endpoint gives the median of every one, as ZooKeeper's provider does).

    ``add`` only appends to a short list (the request path pays for one append); the figures
    are folded from it when read, or when it reaches ``FOLD_AT`` values."""

    __slots__ = ("_count", "_total", "_min", "_max", "samples", "_next", "detailed", "pending")

    def __init__(self, detailed: bool = False) -> None:
        self.detailed = detailed
        self._count = 0
        self._total = 0
        self._min = 0
        self._max = 0
        self.samples: list[int] = []
        self._next = 0
        self.pending: list[int] = []

    def add(self, value: int) -> None:
        pending = self.pending
        pending.append(value)
        if len(pending) >= FOLD_AT:
            self.fold()

    def fold(self) -> None:
        """Take the pending values into the figures."""
        pending = self.pending
        if not pending:
            return
        self.pending = []
        low, high = min(pending), max(pending)
        if self._count == 0 or low < self._min:
            self._min = low
        if self._count == 0 or high > self._max:
            self._max = high
        self._count += len(pending)
        self._total += sum(pending)
        samples = self.samples
        room = RESERVOIR - len(samples)
        if room > 0:
            samples.extend(pending[:room])
            pending = pending[room:]
        for value in pending[-RESERVOIR:]:
            samples[self._next] = value
            self._next = (self._next + 1) % RESERVOIR

    @property
    def count(self) -> int:
        self.fold()
        return self._count

    @property
    def total(self) -> int:
        self.fold()
        return self._total

    @property
    def min(self) -> int:
        self.fold()
        return self._min

    @property
    def max(self) -> int:
        self.fold()
        return self._max

    def reset(self) -> None:
        self.__init__(self.detailed)  # type: ignore[misc]

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the kept samples (0 without any)."""
        self.fold()
        if not self.samples:
            return 0.0
        ordered = sorted(self.samples)
        index = min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))
        return float(ordered[index])


class ServerMetrics:
    """The registry: ``counters[name]`` and ``summaries[name]``, every ZooKeeper name present from the start."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.summaries: dict[str, Summary] = {name: Summary(True) for name in DETAILED}
        self.summaries.update((name, Summary(False)) for name in BASIC)
        # the hot ones, bound once so the request path skips the dict look-up
        self.readlatency = self.summaries["readlatency"]
        self.updatelatency = self.summaries["updatelatency"]
        self.propagation_latency = self.summaries["propagation_latency"]  # txn time to applied here, per txn
        self.auth_failed = 0  # mntr's zk_auth_failed_count (ServerStats): authentications refused

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def record(self, name: str, value: int) -> None:
        self.summaries[name].add(value)

    def reset(self) -> None:
        """``srst``: every figure back to zero (ServerMetrics.resetAll)."""
        for name in self.counters:
            self.counters[name] = 0
        for summary in self.summaries.values():
            summary.reset()
        self.auth_failed = 0


class ServerStats:
    """Counters the four-letter words report (ServerStats)."""

    def __init__(self) -> None:
        self.packets_received = 0
        self.packets_sent = 0
        self.min_latency = -1
        self.max_latency = 0
        self.total_latency = 0
        self.count = 0

    def record_latency(self, ms: int) -> None:
        if ms < self.min_latency or self.min_latency < 0:  # comparisons, not min()/max(): once per request
            self.min_latency = ms
        if ms > self.max_latency:
            self.max_latency = ms
        self.total_latency += ms
        self.count += 1

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    @property
    def avg_latency(self) -> float:
        return self.total_latency / self.count if self.count else 0.0


def summary_lines(name: str, summary: Summary, avg: str) -> list[tuple[str, object]]:
    """mntr's lines for one summary: ``avg_`` (``avg`` already formatted), ``min_``, ``max_``,
    ``cnt_``, ``sum_``, then the quantiles of a detailed one."""
    lines: list[tuple[str, object]] = [(f"avg_{name}", avg), (f"min_{name}", summary.min),
                                       (f"max_{name}", summary.max), (f"cnt_{name}", summary.count),
                                       (f"sum_{name}", summary.total)]
    if summary.detailed:
        lines += [(f"{label}_{name}", int(summary.quantile(q))) for label, q in QUANTILES]
    return lines
