"""Selection of targets by regular expression."""

from __future__ import annotations

import pytest

from torchbend.errors import SelectionError
from torchbend.selection import filter_names, select

WEIGHTS = ["enc.0.weight", "enc.0.bias", "dec.conv.weight"]
ACTS = {"forward": ["x", "enc_0", "dec_conv"], "encode": ["x", "enc_0"]}


def test_match_is_anchored_at_the_start():
    sel = select(["enc"], WEIGHTS, ACTS)
    assert sel.weights == ["enc.0.weight", "enc.0.bias"]
    assert sel.activations == {"forward": ["enc_0"], "encode": ["enc_0"]}


def test_dollar_selects_activations_only():
    sel = select(["enc_0$"], WEIGHTS, ACTS)
    assert sel.weights == []
    assert sel.keys() == ["forward:enc_0", "encode:enc_0"]


def test_scoped_pattern_and_fn():
    assert select(["encode:enc_0$"], WEIGHTS, ACTS).keys() == ["encode:enc_0"]
    assert select(["enc"], WEIGHTS, ACTS, fn="encode").keys() == [
        "enc.0.weight",
        "enc.0.bias",
        "encode:enc_0",
    ]


def test_unknown_pattern_lists_closest_names():
    with pytest.raises(SelectionError, match="did you mean 'dec_conv'"):
        select(["dec_con$"], WEIGHTS, ACTS, owner="Model")
    with pytest.raises(SelectionError, match="not a valid regular expression"):
        select(["("], WEIGHTS, ACTS)
    with pytest.raises(SelectionError, match=r"method\(s\) \['decode'\] .* were not traced"):
        select(["enc"], WEIGHTS, ACTS, fn="decode")
    with pytest.raises(SelectionError, match="patterns must be strings"):
        select([3], WEIGHTS, ACTS)  # type: ignore[list-item]


def test_without_traced_methods_only_weights_are_searched():
    with pytest.raises(SelectionError, match="only weights were searched"):
        select(["enc_0$"], WEIGHTS, {})


def test_filter_names():
    assert filter_names(WEIGHTS, flt="enc") == ["enc.0.weight", "enc.0.bias"]
    assert filter_names(WEIGHTS, flt=["dec", "enc.0.b"]) == ["enc.0.bias", "dec.conv.weight"]
    assert filter_names(WEIGHTS, exclude=r".*bias") == ["enc.0.weight", "dec.conv.weight"]
