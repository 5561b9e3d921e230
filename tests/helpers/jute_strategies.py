"""Hypothesis strategies for jute records, built from each class's ``JUTE_FIELDS``."""

from __future__ import annotations

import inspect
from typing import Any

from hypothesis import strategies as st

from zkpy.wire import proto, txn
from zkpy.wire.jute import Record

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# UTF-8 cannot carry lone surrogates, and neither can a Java string read from UTF-8
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
USTRING = st.none() | TEXT
BUFFER = st.none() | st.binary(max_size=40)


def all_records() -> list[type[Record]]:
    """Every jute record class defined in proto.py and txn.py."""
    out = []
    for module in (proto, txn):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Record) and cls is not Record and cls.__module__ == module.__name__:
                out.append(cls)
    return sorted(out, key=lambda c: (c.__module__, c.__name__))


RECORDS = all_records()


def strategy_for(jute_type: Any) -> st.SearchStrategy[Any]:
    """Values of one jute type: 'int', 'long', 'boolean', 'buffer', 'ustring', a record class,
    or ('vector', elem). A null vector decodes to [], so vectors are never generated null."""
    if jute_type == "int":
        return INT32
    if jute_type == "long":
        return INT64
    if jute_type == "boolean":
        return st.booleans()
    if jute_type == "buffer":
        return BUFFER
    if jute_type == "ustring":
        return USTRING
    if isinstance(jute_type, tuple):
        assert jute_type[0] == "vector", jute_type
        return st.lists(strategy_for(jute_type[1]), max_size=4)
    assert isinstance(jute_type, type) and issubclass(jute_type, Record), jute_type
    return record_strategy(jute_type)


def record_strategy(cls: type[Record]) -> st.SearchStrategy[Any]:
    return st.builds(cls, **{name: strategy_for(jt) for name, jt in cls.JUTE_FIELDS})


ANY_RECORD = st.sampled_from(RECORDS).flatmap(lambda cls: st.tuples(st.just(cls), record_strategy(cls)))
