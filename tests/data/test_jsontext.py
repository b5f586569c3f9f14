"""The JSON nesting bound is counted on the text, so the same input is refused on every Python build."""

import json

from hypothesis import given
from hypothesis import strategies as st

from sampledlm.data.jsontext import MAX_DEPTH, nesting_depth, too_deep


def depth_of(value) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


words = st.text(alphabet='ab[]{}"\\ ', max_size=6)
values = st.recursive(st.integers() | words, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(words, inner, max_size=3), max_leaves=20)


@given(values)
def test_depth_is_the_parsed_values_depth_whatever_the_strings_hold(value):
    assert nesting_depth(json.dumps(value)) == depth_of(value)


def test_the_bound():
    assert not too_deep("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert too_deep("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert not too_deep(json.dumps({"s": "[" * 5000}))  # brackets inside a string are text
