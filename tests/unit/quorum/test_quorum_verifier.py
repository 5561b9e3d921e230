"""QuorumMaj: more than half of the voting members is a quorum; observers and strangers never count."""

from __future__ import annotations

import pytest

from zkpy.quorum import QuorumMaj


def test_majority_of_voters_is_a_quorum() -> None:
    qv = QuorumMaj.of([1, 2, 3])
    assert not qv.contains_quorum([1])
    assert qv.contains_quorum([1, 2])
    four = QuorumMaj.of([1, 2, 3, 4])
    assert not four.contains_quorum([1, 2])
    assert four.contains_quorum([1, 2, 4])
    assert QuorumMaj.of([7]).contains_quorum([7])


def test_observers_and_unknown_sids_do_not_count() -> None:
    qv = QuorumMaj.of([1, 2, 3], observers=[4, 5])
    assert not qv.contains_quorum([1, 4, 5, 99])
    assert qv.members == {1, 2, 3, 4, 5}
    assert qv.is_voter(1) and not qv.is_voter(4)
    assert qv.weight(4) == 1


def test_a_sid_cannot_both_vote_and_observe() -> None:
    with pytest.raises(ValueError):
        QuorumMaj.of([1, 2], observers=[2])
    with pytest.raises(ValueError):
        QuorumMaj.of([])
