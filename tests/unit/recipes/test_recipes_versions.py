"""Version order and constraint expressions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plumb.aggregator.recipes import Expression, ExpressionError, compare, parse_version


def v(text: str):
    parsed = parse_version(text)
    assert parsed is not None, text
    return parsed


@pytest.mark.parametrize(
    ("left", "op", "right"),
    [
        ("570.86.15", ">", "570.9"),
        ("6.8.0-1030-aws", ">=", "6.8"),
        ("v1.33.5-eks-113cf36", ">=", "1.32.4"),
        ("1.32.4", ">=", "1.32.4"),
        ("1.32.3", "<", "1.32.4"),
        ("6.8", "==", "6.8.0"),
        ("12.8.1", "==", "12.8"),
        ("12.9", "!=", "12.8"),
        ("580.65.06", ">", "580"),
    ],
)
def test_version_aware_comparison(left, op, right):
    assert Expression.parse(f"{op} {right}").holds(left)


def test_ranges_need_every_clause():
    expr = Expression.parse(">= 570, < 600")
    assert expr.holds("570.86.15") and expr.holds("595.91.07")
    assert not expr.holds("565.57.01") and not expr.holds("600.0")


def test_bare_operand_means_equality_and_strings_compare_as_text():
    assert Expression.parse("ubuntu").holds("ubuntu")
    assert not Expression.parse("ubuntu").holds("rhel")
    assert Expression.parse("!= cos").holds("ubuntu")


def test_ordering_never_holds_for_a_non_version():
    assert not Expression.parse(">= 6.8").holds("unknown")


@pytest.mark.parametrize("bad", ["", ">= ubuntu", ">= 570,", "=="])
def test_malformed_expressions_are_rejected(bad):
    with pytest.raises(ExpressionError):
        Expression.parse(bad)


versions = st.builds(
    lambda parts, prefix, suffix: prefix + ".".join(map(str, parts)) + suffix,
    st.lists(st.integers(0, 1000), min_size=1, max_size=4),
    st.sampled_from(["", "v"]),
    st.sampled_from(["", "-1030-aws", "-eks-113cf36", "+build.7"]),
)


@given(versions, versions)
def test_version_order_is_total_and_antisymmetric(a, b):
    va, vb = v(a), v(b)
    assert compare(va, vb) == -compare(vb, va)
    assert (va <= vb) or (vb <= va)
    assert (compare(va, vb) == 0) == (va == vb)
    if va == vb:
        assert hash(va) == hash(vb)


@given(versions, versions, versions)
def test_version_order_is_transitive(a, b, c):
    va, vb, vc = sorted([v(a), v(b), v(c)])
    assert va <= vb <= vc and va <= vc


@given(versions, versions)
def test_expression_operators_agree_with_the_order(a, b):
    sign = compare(v(a), v(b))
    operand = str(v(b).parts[0]) + "".join(f".{p}" for p in v(b).parts[1:])
    assert Expression.parse(f">= {operand}").holds(a) == (sign >= 0)
    assert Expression.parse(f"< {operand}").holds(a) == (sign < 0)
