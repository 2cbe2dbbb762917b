"""What a function derives from a facts dict, remembered for the last few dicts it was given.

One evaluation passes the same facts dict through criteria, recipe, stack hash and drift, and
each reader that holds only the mapping would otherwise derive the same thing again (the GPU
views, the stack's facts). Facts dicts are replaced, never edited in place, so a dict's
identity names its contents: `last_few` keeps results by the identity of the arguments, and
holds the arguments so no identity is reused while remembered.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from functools import wraps
from typing import TypeVar

__all__ = ["last_few"]

F = TypeVar("F", bound=Callable[..., object])

# A node's facts, its baseline's, and a few pool mates' in one evaluation.
SIZE = 8


def last_few(f: F) -> F:
    """`f` (positional arguments only), returning its remembered result for the very same
    arguments (by identity) among the last SIZE calls; callers must not edit what it returns."""
    held: OrderedDict[tuple[int, ...], tuple[tuple, object]] = OrderedDict()

    @wraps(f)
    def call(*args: object) -> object:
        key = tuple(map(id, args))
        found = held.get(key)
        if found is not None and all(a is b for a, b in zip(found[0], args, strict=True)):
            return found[1]
        result = f(*args)
        held[key] = (args, result)
        if len(held) > SIZE:
            held.popitem(last=False)
        return result

    return call  # type: ignore[return-value]
