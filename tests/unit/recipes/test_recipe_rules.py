"""The recipes' pure rules: sequence order, lock predecessors and holders, queue order, 2PC decisions."""

from __future__ import annotations

from zkpy.recipes.lock import lock_holders
from zkpy.recipes.queue import entry_order
from zkpy.recipes.sequential import find_prefixed, new_guid, sequence_of, sort_by_sequence
from zkpy.recipes.twophase import ABORT, COMMIT, PENDING, Outcome, decide


def test_sequence_numbers_order_names_of_any_shape() -> None:
    names = ["b__lock__0000000003", "read-0000000001", "x", "a-guid__rlock__0000000002", "neg-2147483648"]
    assert sequence_of("read-0000000001") == 1
    assert sequence_of("x") is None
    assert sequence_of("neg-2147483648") == -2147483648  # a wrapped counter, as the server prints it
    assert sort_by_sequence(names) == ["neg-2147483648", "read-0000000001", "a-guid__rlock__0000000002",
                                       "b__lock__0000000003"]


def test_guids_are_kazoo_shaped_and_found_by_prefix() -> None:
    guid = new_guid()
    assert len(guid) == 32 and all(c in "0123456789abcdef" for c in guid)
    assert new_guid() != guid
    assert find_prefixed(["other__lock__0000000001", f"{guid}__lock__0000000002"], guid) == f"{guid}__lock__0000000002"
    assert find_prefixed(["other__lock__0000000001"], guid) is None


def test_lock_holders_are_the_lowest_writer_or_the_readers_before_the_first_writer() -> None:
    assert lock_holders([]) == []
    assert lock_holders(["w__lock__0000000003", "r__rlock__0000000004"]) == ["w__lock__0000000003"]
    readers_first = ["r2__rlock__0000000002", "r1__rlock__0000000001", "w__lock__0000000003",
                     "r3__rlock__0000000004", "ready"]
    assert lock_holders(readers_first) == ["r1__rlock__0000000001", "r2__rlock__0000000002"]


def test_queue_entries_go_by_priority_then_fifo_for_kazoo_and_zkpy_names() -> None:
    guid = new_guid()
    names = [f"entry-100-{guid}-0000000001", "entry-100-0000000000", "entry-005-0000000004",
             f"entry-005-{guid}-0000000003", "ready", "entry-999-0000000002"]
    assert entry_order(names) == ["entry-005-" + guid + "-0000000003", "entry-005-0000000004",
                                  "entry-100-0000000000", f"entry-100-{guid}-0000000001", "entry-999-0000000002"]


def test_two_phase_decision_is_a_function_of_the_votes_and_the_living() -> None:
    everyone = {"a", "b", "c"}
    assert decide({"a": COMMIT, "b": COMMIT, "c": COMMIT}, set()) is Outcome.COMMITTED  # voted, then gone: fine
    assert decide({"a": COMMIT, "b": ABORT, "c": b""}, everyone) is Outcome.ABORTED
    assert decide({"a": COMMIT, "b": PENDING, "c": COMMIT}, everyone) is None
    assert decide({"a": COMMIT, "b": PENDING, "c": COMMIT}, {"a", "c"}) is Outcome.ABORTED  # b died mid-vote
    assert decide({"a": COMMIT, "b": b"", "c": COMMIT}, {"a", "c"}) is None  # b has not joined yet
    assert decide({}, set()) is None
