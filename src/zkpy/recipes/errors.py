"""The recipes' own exceptions (ZooKeeper's error codes stay in `zkpy.errors`).

kazoo's names, so that code moving from kazoo catches the same ones: `LockTimeout` and
`CancelledError` (kazoo.exceptions). zkpy's `CancelledError` is an ordinary Exception raised by a
recipe whose ``cancel()`` was called; asyncio's own ``CancelledError`` (task cancellation)
passes through every recipe untouched, after the recipe has cleaned up its nodes.
"""

from __future__ import annotations


class RecipeError(Exception):
    """A recipe could not do what was asked (not a ZooKeeper error code)."""


class RecipeTimeout(RecipeError, TimeoutError):
    """A recipe's wait ran past its ``timeout``; whatever it created for the wait is gone."""


class LockTimeout(RecipeTimeout):
    """A lock, semaphore or election was not won within ``timeout`` (kazoo's name)."""


class CancelledError(RecipeError):
    """The wait was given up through the recipe's ``cancel()`` (kazoo's name)."""


class LockLost(RecipeError):
    """The holder's lock node is gone (session lost, or the node was deleted by a revoker)."""
