"""paths.path_error's fast test agrees with the character walk that names each fault."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from zkpy.tree.paths import _walk, path_error

# the characters whose placement decides validity, plus a few ordinary ones and each refused range's edges
_ALPHABET = st.sampled_from(["/", ".", "a", "Z", "0", "-", " ", "\x00", "\x01", "\x1f", "\x20", "\x7e", "\x7f",
                             "\x9f", "\xa0", "\ud7ff", "\ud800", "\udfff", "\ue000", "\uf8ff", "\uf900",
                             "\uffef", "\ufff0", "\uffff", "\U00010000", "\U0001F600"])


@settings(max_examples=2000, deadline=None)
@given(st.lists(_ALPHABET, max_size=12).map("".join))
def test_fast_path_agrees_with_the_walk(path: str) -> None:
    assert path_error(path) == _walk(path)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20).map(lambda s: "/" + s))
def test_fast_path_agrees_on_any_text(path: str) -> None:
    assert path_error(path) == _walk(path)


def test_non_strings_and_edges() -> None:
    for value in (None, 5, b"/a", "", "/", "a", "/a/", "/a"):
        assert path_error(value) == _walk(value)
    assert path_error("/a/b.c/..d") is None
    assert path_error("/a/./b") == "relative paths not allowed @3"
