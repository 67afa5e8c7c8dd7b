"""Selection of targets by regular expression."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.engine.selection import filter_names, select
from torchbend.errors import SelectionError

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


def test_aliases_name_targets_in_patterns_configs_and_tables(tmp_path):
    import copy

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 4, 3, padding=1), nn.Tanh(), nn.Conv1d(4, 1, 3, padding=1))
    bended = tb.BendedModule(model)
    x = torch.randn(1, 1, 32)
    bended.trace(input=x)
    bended.mark("mid", "_1")  # a node of forward
    bended.mark("first", "0.weight")
    assert bended.aliases == {"mid": "forward:_1", "first": "0.weight"}
    assert bended.bend(tb.Scale(2.0), "#mid") == ["forward:_1"]
    assert bended.bend(tb.Scale(0.5), "#first") == ["0.weight"]
    assert list(bended.get_activations("#mid", input=x)) == ["_1"]
    table = bended.print_activations(out=tmp_path / "acts.txt")
    assert table.headers[-1] == "alias" and ["#mid"] == [r[-1] for r in table.rows if r[-1]]
    weights = bended.print_weights(out=tmp_path / "weights.txt")
    assert weights.headers[-1] == "alias"
    assert [(r[0], r[-1]) for r in weights.rows if r[-1]] == [("0.weight", "#first")]
    path = tmp_path / "bends.json"
    bended.bending_config().save(path)
    again = tb.BendedModule(copy.deepcopy(model))
    again.trace(input=x)
    again.bend(tb.BendingConfig.load(path))
    assert again.aliases == bended.aliases and torch.equal(again(x), bended(x))
    y = torch.randn(2, 1, 20)
    bended.trace(input=y)  # a new graph: the alias bends it too
    assert torch.equal(bended(y), again(y))


@pytest.mark.parametrize(
    ("act", "message"),
    [
        (lambda b: b.bend(tb.Scale(2.0), "#nope"), r"no alias '#nope'; known aliases: #mid"),
        (lambda b: b.mark("1x", "_1"), "an alias is a name made of letters"),
        (lambda b: b.mark("mid", "_2"), "alias #mid stands for 'forward:_1' in bendings"),
        (lambda b: b.mark("z", "_9"), "cannot mark 'forward:_9'"),
    ],
)
def test_bad_aliases_are_refused_with_what_exists(act, message):
    bended = tb.BendedModule(nn.Sequential(nn.Conv1d(1, 4, 3), nn.Tanh(), nn.Conv1d(4, 1, 3)))
    bended.trace(input=torch.randn(1, 1, 16))
    bended.mark("mid", "_1")
    bended.bend(tb.Scale(2.0), "#mid")
    with pytest.raises(tb.SelectionError, match=message):
        act(bended)
