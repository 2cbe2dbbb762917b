"""Documents from callers are refused past their size, depth and alias-expanded node count."""

from __future__ import annotations

from itertools import pairwise

import pytest

from plumb.aggregator.errors import InvalidInput, TooLarge
from plumb.aggregator.untrusted import Limits, check_tree, load_yaml, load_yaml_all

# "Billion laughs": 9 levels of 9 aliases each, 9**9 (387 million) strings once expanded.
# tests/unit/bundle/test_bundle_input.py sends the same as a recipe.
BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in pairwise("abcdefghi")
)


def test_the_alias_bomb_is_under_500_bytes_and_refused_as_too_large():
    assert len(BOMB) < 500
    with pytest.raises(TooLarge, match="aliases"):
        load_yaml(BOMB)


def test_an_alias_to_its_own_anchor_is_refused():
    with pytest.raises(InvalidInput, match="refers to itself"):
        load_yaml("a: &a [1, *a]")


def test_nesting_past_the_depth_is_refused_and_at_it_passes():
    limits = Limits(max_depth=5)
    assert load_yaml("[[[[[1]]]]]", limits) == [[[[[1]]]]]
    with pytest.raises(InvalidInput, match="deeper than 5"):
        load_yaml("[[[[[[1]]]]]]", limits)


def test_depth_counts_what_aliases_expand_to():
    # Three levels at the anchor, three more around the alias: six once expanded.
    with pytest.raises(InvalidInput, match="once aliases expand"):
        load_yaml("a: &a [[1]]\nb: [[[*a]]]", Limits(max_depth=5))


def test_a_text_over_the_byte_limit_is_too_large():
    with pytest.raises(TooLarge, match="exceeds 16 bytes"):
        load_yaml("k: " + "v" * 20, Limits(max_bytes=16))


def test_several_documents_are_bounded_together():
    assert load_yaml_all("---\na: 1\n---\nb: 2\n") == [{"a": 1}, {"b": 2}]
    with pytest.raises(TooLarge):
        load_yaml_all("---\n[1, 2, 3]\n---\n[4, 5, 6]\n", Limits(max_nodes=7))


def test_an_ordinary_document_loads_as_safe_load_would():
    assert load_yaml("a: [1, 2]\nb: {c: d}\nt: true\n") == {"a": [1, 2], "b": {"c": "d"}, "t": True}


def test_parsed_json_is_held_to_the_same_depth_and_count():
    deep: dict = {}
    node = deep
    for _ in range(6):
        node["k"] = {}
        node = node["k"]
    with pytest.raises(InvalidInput, match="deeper than 5"):
        check_tree(deep, Limits(max_depth=5))
    shared = ["x"] * 10
    wide = [shared] * 10  # 10 lists of the same 10 strings: 111 nodes written out
    check_tree(wide, Limits(max_nodes=111))
    with pytest.raises(TooLarge):
        check_tree(wide, Limits(max_nodes=110))
