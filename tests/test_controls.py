"""Named live controls: arithmetic views, update without re-tracing, ranges, ramps."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from torch import nn

import torchbend as tb


class Two(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv1d(1, 4, 3, padding=1)
        self.b = nn.Conv1d(4, 1, 3, padding=1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.fixture
def bended():
    torch.manual_seed(0)
    b = tb.BendedModule(Two())
    b.trace(x=torch.randn(1, 1, 32))
    return b


def test_parameter_arithmetic_views_share_one_knob():
    p = tb.BendingParameter("p", 0.5, range=(0.0, 1.0))
    views = [2.0 * p, p + 1, 1 - p, p * 3, -p, p / 2]
    assert [v.get() for v in views] == [1.0, 1.5, 0.5, 1.5, -0.5, 0.25]
    p.set(1.0)
    assert [v.get() for v in views] == [2.0, 2.0, 0.0, 3.0, -1.0, 0.5]
    assert (2 * (p + 1)).get() == 4.0


def test_parameter_validation():
    with pytest.raises(tb.BendingError, match="identifier"):
        tb.BendingParameter("not a name", 1.0)
    with pytest.raises(tb.BendingError, match="float, an int or a bool"):
        tb.BendingParameter("p", "1")
    p = tb.BendingParameter("p", 0.5, range=(0.0, 1.0))
    with pytest.raises(tb.BendingError, match=r"out of its range \[0.0, 1.0\]"):
        p.set(2.0)
    assert p.get() == 0.5
    clamped = tb.BendingParameter("c", 0.5, range=(0.0, 1.0), clamp=True)
    clamped.set(3.0)
    assert clamped.get() == 1.0
    n = tb.BendingParameter("n", 3)
    with pytest.raises(tb.BendingError, match="takes an int"):
        n.set(2.5)
    n.set(4)
    assert n.get() == 4 and isinstance(n.get(), int)
    flag = tb.BendingParameter("flag", True)
    flag.set(False)
    assert flag.get() is False


def test_update_changes_activation_bending_without_retrace_or_recompile(bended):
    x = torch.randn(1, 1, 32)
    gain = tb.BendingParameter("gain", 1.0)
    bended.bend(tb.Scale(gain), "a$")
    gm = bended.graph_module()
    entries = len(bended.graphs("forward"))
    reference = bended.module
    out1 = bended(x)
    bended.update("gain", 0.0)
    assert bended.graph_module() is gm
    assert len(bended.graphs("forward")) == entries
    assert torch.allclose(bended(x), reference.b(torch.zeros(1, 4, 32)))
    bended.update("gain", 1.0)
    assert torch.equal(bended(x), out1)


def test_one_knob_drives_several_callbacks(bended):
    x = torch.randn(1, 1, 32)
    p = tb.BendingParameter("p", 0.0)
    bended.bend(tb.Scale(1.0 - p), "a$")
    bended.bend(tb.Scale(2.0 * p), r"b\.weight")
    assert list(bended.controllables) == ["p"]
    bended.update("p", 0.25)
    m = bended.module
    expected = nn.functional.conv1d(
        torch.relu(m.a(x) * 0.75), m.b.weight * 0.5, m.b.bias, padding=1
    )
    assert torch.allclose(bended(x), expected, atol=1e-6)


def test_weight_bendings_are_recomputed_only_for_their_weights(bended):
    counted = []

    class Counting(tb.Scale):
        def bend_weight(self, weight, name):
            counted.append(name)
            return super().bend_weight(weight, name)

    p = tb.BendingParameter("p", 1.0)
    q = tb.BendingParameter("q", 1.0)
    bended.bend(Counting(p), r"a\.weight")
    bended.bend(Counting(q), r"b\.weight")
    counted.clear()
    bended.update("p", 2.0)
    assert counted == ["a.weight"]
    assert torch.equal(bended.weight("a.weight"), 2 * bended.module.a.weight)


def test_update_errors(bended):
    bended.bend(tb.Scale(tb.BendingParameter("gain", 1.0, range=(0.0, 2.0))), "a$")
    with pytest.raises(
        tb.BendingError, match=r"no control named 'gian'; known controls: \['gain'\]"
    ):
        bended.update("gian", 1.0)
    with pytest.raises(tb.BendingError, match="out of its range"):
        bended.update("gain", 3.0)
    with pytest.raises(tb.BendingError, match="already named 'gain'"):
        bended.bend(tb.Bias(tb.BendingParameter("gain", 0.0)), "b$")


def test_mask_prob_and_seed_controls_redraw_reproducibly(bended):
    x = torch.randn(1, 1, 32)
    prob = tb.BendingParameter("prob", 0.0, range=(0.0, 1.0))
    seed = tb.BendingParameter("seed", 0)
    bended.bend(tb.Mask(prob=prob, dim=-2, seed=seed), "a$")
    plain = bended(x)
    bended.update("prob", 1.0)
    assert torch.allclose(bended(x), bended.module.b(torch.zeros(1, 4, 32)))
    bended.update("prob", 0.5)
    first = bended(x)
    bended.update("seed", 1)
    other = bended(x)
    bended.update("seed", 0)
    assert torch.equal(bended(x), first)
    assert not torch.equal(first, plain) or not torch.equal(other, plain)


def test_ramped_control_spreads_a_jump_over_the_block(bended):
    x = torch.ones(1, 1, 64)
    gain = tb.BendingParameter("gain", 0.0, ramp=1)
    identity = tb.BendedModule(nn.Identity())
    identity.trace(input=x)
    identity.bend(tb.Scale(gain), "input_1$")
    assert torch.equal(identity(x), torch.zeros(1, 1, 64))
    identity.update("gain", 1.0)
    ramp = identity(x)
    assert ramp[0, 0, 0] < 0.05 and ramp[0, 0, -1] == 1.0
    assert torch.all(ramp.diff() > 0)
    assert ramp.diff().abs().max() < 0.02
    assert torch.equal(identity(x), x)
    identity.update("gain", 0.0, ramp=False)  # a jump: between two sounds, say
    assert torch.equal(identity(x), torch.zeros(1, 1, 64))


def test_a_jump_of_a_ramped_weight_control_reaches_the_weight_at_once(bended):
    gain = tb.BendingParameter("gain", 1.0, ramp=4)
    bended.bend(tb.Scale(gain), r"b\.weight")
    bended.update("gain", 0.0, ramp=False)
    assert torch.equal(bended.weight("b.weight"), torch.zeros_like(bended.weight("b.weight")))


def test_weight_bendings_crossfade_over_ramp_calls(bended):
    x = torch.randn(1, 1, 32)
    gain = tb.BendingParameter("gain", 1.0, ramp=4)
    bended.bend(tb.Scale(gain), r"b\.weight")
    w = bended.module.b.weight.detach()
    bended.update("gain", 0.0)
    seen = []
    for _ in range(5):
        seen.append(bended.weight("b.weight").clone())
        bended(x)
    assert [round(float(s.abs().sum() / w.abs().sum()), 3) for s in seen] == [
        0.75,
        0.5,
        0.25,
        0.0,
        0.0,
    ]


def test_update_derives_state_once_and_only_for_arguments_that_need_it(bended):
    derived: list[str] = []

    class CountingMask(tb.Mask):
        def control_changed(self) -> None:
            derived.append("mask")
            super().control_changed()

    class CountingScale(tb.Scale):
        def control_changed(self) -> None:
            derived.append("scale")

    bended.bend(CountingMask(prob=tb.BendingParameter("prob", 0.0), dim=-2, seed=0), "a$")
    bended.bend(CountingScale(tb.BendingParameter("gain", 1.0)), r"b\.weight")
    bended.update("prob", 0.5)
    bended.update("gain", 2.0)
    assert derived == ["mask"]


def test_controls_push_into_their_readers_and_copy_without_them():
    p = tb.BendingParameter("p", 1.0, ramp=2)
    scale = tb.Scale(p)
    assert p.readers() == [scale]
    p.set(3.0)
    assert scale.scale == 3.0 and scale._ramps["scale"] == (1.0, 2.0, 3.0)
    p.advance()
    assert scale._ramps["scale"] == (2.0, 3.0, 3.0)
    assert copy.deepcopy(p).readers() == [] and pickle.loads(pickle.dumps(p)).readers() == []


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: tb.BendingParameter("k", float("inf")), "control 'k' takes a finite float, got"),
        (lambda: tb.BendingParameter("k", float("nan")), "control 'k' takes a finite float, got"),
        (lambda: tb.BendingParameter("k", 10**400), "control 'k' takes a finite int, got int"),
        (lambda: tb.BendingParameter("k", 1).set(float("inf")), "takes a finite int, got float"),
        (lambda: tb.BendingParameter("k", 1.0).set(float("nan")), "takes a finite float"),
        (lambda: tb.BendingParameter("k", 1.0).set("2"), "takes a finite float, got str: '2'"),
        (lambda: tb.BendingParameter("k", 1.0).set(True), "takes a finite float, got bool"),
        (lambda: tb.BendingParameter("k", True).set(2), "takes True or False, got int: 2"),
        (lambda: tb.BendingParameter("k", 1.0, ramp=-1), r"ramp is a number of calls between 0"),
        (lambda: tb.BendingParameter("k", 1.0, ramp=10**12), r"between 0 and 65536, got 10{12}"),
        (lambda: tb.BendingParameter("k", 1.0, ramp=2.0), r"between 0 and 65536, got 2.0"),
        (lambda: tb.BendingParameter("k", 1.0, ramp=True), r"between 0 and 65536, got True"),
        (lambda: tb.BendingParameter("k", 1.0, range=(1,)), r"range is \(low, high\), two finite"),
        (lambda: tb.BendingParameter("k", 1.0, range=(0, float("inf"))), "two finite numbers"),
        (lambda: tb.BendingParameter("k", 1.0, range=("0", 1)), "two finite numbers"),
        (lambda: tb.BendingParameter("k", 1.0, clamp="yes"), "clamp is True or False"),
        (lambda: tb.BendingParameter("k", 1.0) * float("inf"), "finite numbers only; got scale"),
        (lambda: tb.BendingParameter("k", 1.0) + float("nan"), "finite numbers only; got offset"),
    ],
)
def test_controls_take_finite_numbers_of_their_kind_and_sane_settings(build, message):
    with pytest.raises(tb.BendingError, match=message):
        build()


def test_a_control_bound_to_an_argument_refuses_what_the_argument_refuses(bended):
    x = torch.randn(1, 1, 32)
    std = tb.BendingParameter("std", 0.0)
    prob = tb.BendingParameter("prob", 0.0)
    bended.bend(tb.Noise(std=std, seed=0), "a$")
    bended.bend(tb.Mask(prob=2 * prob, dim=-2, seed=0), "b$")
    before = bended(x)
    with pytest.raises(
        tb.BendingError,
        match=r"control 'std': -1.0 would make Noise.std -1.0, but std is a standard deviation "
        r"and must be a finite number >= 0; give 'std' a value >= 0, or make the control clamp",
    ):
        bended.update("std", -1.0)
    with pytest.raises(tb.BendingError, match=r"would make Mask.prob 2.0, .* between 0 and 0.5"):
        bended.update("prob", 1.0)
    with pytest.raises(tb.BendingError, match="takes a finite float, got float: inf"):
        bended.update("prob", float("inf"))
    assert (std.get(), prob.get()) == (0.0, 0.0)
    assert torch.equal(bended(x), before)
    bended.update("prob", 0.5)
    assert torch.equal(bended(x), torch.zeros(1, 1, 32))  # Mask.prob 1: b's output zeroed


def test_a_reversed_view_bounds_the_control_the_other_way_round(bended):
    keep = tb.BendingParameter("keep", 0.5, clamp=True)
    bended.bend(tb.Mask(prob=1.0 - keep, dim=-2, seed=0), "b$")  # prob in [0, 1]: keep too
    assert keep.limits() == (0.0, 1.0)
    bended.update("keep", 3.0)
    assert keep.get() == 1.0
    free = tb.BendingParameter("free", 0.5, range=(0.0, 2.0), clamp=True)
    bended.bend(tb.Scale(1.0 - free), "a$")  # a reversed view of an unbounded argument
    assert free.limits() == (0.0, 2.0)


# -- widgets: interface hints ------------------------------------------------------------------


def test_widgets_are_derived_from_the_control_unless_given():
    from torchbend.controls import Widget

    assert tb.BendingParameter("gain", 0.5).widget == Widget("knob", label="gain")
    assert tb.BendingParameter("steps", 3, range=(1, 8)).widget.kind == "slider"
    assert tb.BendingParameter("mute", False).widget.kind == "toggle"
    wave = tb.BendingParameter(
        "wave", 1, range=(0, 2), widget=Widget(choices=["sine", "saw", "sq"])
    )
    assert wave.widget == Widget("menu", label="wave", choices=("sine", "saw", "sq"))
    cutoff = tb.BendingParameter(
        "cutoff",
        1000.0,
        range=(20.0, 20000.0),
        widget=Widget(unit="Hz", curve="log", label="Cutoff", group="filter", step=1.0),
    )
    assert (cutoff.widget.kind, cutoff.widget.label, cutoff.widget.group) == (
        "knob",
        "Cutoff",
        "filter",
    )
    # The repr shows what differs from the derived widget, as code that builds it again.
    assert repr(tb.BendingParameter("gain", 0.5)) == "BendingParameter('gain', 0.5)"
    assert repr(cutoff) == (
        "BendingParameter('cutoff', 1000.0, range=(20.0, 20000.0), widget=Widget(unit='Hz', "
        "curve='log', label='Cutoff', group='filter', step=1.0))"
    )
    assert repr(wave).endswith("widget=Widget('menu', choices=('sine', 'saw', 'sq')))")
    assert cutoff.widget_changes() == {
        "unit": "Hz",
        "curve": "log",
        "label": "Cutoff",
        "group": "filter",
        "step": 1.0,
    }
    for copied in (copy.deepcopy(cutoff), pickle.loads(pickle.dumps(cutoff))):
        assert copied.widget == cutoff.widget


def test_describe_gives_the_values_a_control_takes_and_its_widget(bended):
    from torchbend.controls import Widget

    std = tb.BendingParameter("std", 0.1, clamp=True, widget=Widget(group="noise"))
    bended.bend(tb.Noise(std=std, seed=0), "a$")
    assert std.describe() == {
        "name": "std",
        "type": "float",
        "value": 0.1,
        "range": None,
        "limits": [0.0, None],  # Noise.std >= 0 bounds it; nothing above
        "clamp": True,
        "ramp": 0,
        "widget": {
            "kind": "knob",
            "unit": "",
            "curve": "linear",
            "label": "std",
            "group": "noise",
            "choices": [],
            "step": None,
        },
    }
    assert tb.BendingParameter("on", True).describe()["limits"] == [0, 1]


def test_controls_are_listed_with_their_values_and_widgets(bended):
    from torchbend.controls import Widget

    bended.bend(tb.Scale(tb.BendingParameter("gain", 1.0, range=(0.0, 2.0), ramp=4)), "a$")
    wave = tb.BendingParameter("wave", 0, range=(0, 1), widget=Widget(choices=("up", "down")))
    bended.bend(tb.Roll(wave), "b$")
    table = bended._engine.board.table()
    assert table.headers[:7] == ["name", "type", "value", "values", "clamp", "ramp", "widget"]
    rows = {row[0]: row for row in table.rows}
    assert rows["gain"][1:7] == ["float", 1.0, "[0.0, 2.0]", "no", 4, "knob"]
    assert rows["wave"][6] == "menu (up, down)"
    assert "menu (up, down)" in str(table) and "<table>" in table._repr_html_()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda W: W("dial"), r"Widget: kind is one of 'knob', 'slider', .*, got 'dial'"),
        (lambda W: W(curve="lin"), r"curve is one of .*, got 'lin'; did you mean 'linear'\?"),
        (lambda W: W(unit=3), "Widget: unit is a string, got 3"),
        (lambda W: W(label=""), "label is a non-empty string or None"),
        (lambda W: W(choices="ab"), "choices are a list of strings"),
        (lambda W: W(choices=["a", "a"]), "choices are distinct non-empty strings"),
        (lambda W: W("knob", choices=["a"]), "choices are the entries of a menu, not of a knob"),
        (lambda W: W("menu"), "a menu needs its choices"),
        (lambda W: W(step=0), "step is a finite number > 0 or None, got 0"),
        (lambda W: W(step=float("nan")), "step is a finite number > 0 or None, got nan"),
        (
            lambda W: tb.BendingParameter("k", 1.0, widget="knob"),
            r"control 'k': widget is a Widget\(...\)",
        ),
        (
            lambda W: tb.BendingParameter("k", True, widget=W("knob")),
            "control 'k' is a bool, drawn as a toggle; got widget kind 'knob'",
        ),
        (
            lambda W: tb.BendingParameter("k", 1.0, widget=W("toggle")),
            "a toggle draws bool controls, and 'k' is a float",
        ),
        (
            lambda W: tb.BendingParameter("k", 0.0, range=(0, 1), widget=W(choices=["a", "b"])),
            "a menu draws an int control",
        ),
        (
            lambda W: tb.BendingParameter("k", 0, widget=W(choices=["a", "b"])),
            r"a menu of 2 choices takes values 0 to 1; give the control range=\(0, 1\)",
        ),
        (
            lambda W: tb.BendingParameter(
                "k", 0, range=(0, 1), widget=W("menu", choices=["a", "b"], curve="exp")
            ),
            "a menu has no curve or step",
        ),
        (
            lambda W: tb.BendingParameter("k", 1.0, widget=W(curve="exp")),
            r"control 'k': curve 'exp' spreads a range over the widget; give the control a range",
        ),
        (
            lambda W: tb.BendingParameter("k", 1.0, range=(0.0, 1.0), widget=W(curve="log")),
            "a log curve needs a range of positive numbers",
        ),
        (
            lambda W: tb.BendingParameter("k", 1, widget=W(step=0.5)),
            "an int control steps by whole numbers, got step=0.5",
        ),
    ],
)
def test_widgets_refuse_what_no_host_could_draw(build, message):
    from torchbend.controls import Widget

    with pytest.raises(tb.BendingError, match=message):
        build(Widget)


def test_print_controls_lists_each_control_with_its_limits_and_widget(bended, tmp_path):
    std = tb.BendingParameter("std", 0.1, widget=tb.Widget(unit="dB", group="noise"))
    bended.bend(tb.Noise(std=std, seed=0), "a$")
    table = bended.print_controls(out=tmp_path / "controls.txt")
    (row,) = table.rows
    assert row[0] == "std" and "knob" in row and "dB" in row and "noise" in row
    assert row[3] == "[0.0, inf]"  # no range of its own: the bound of Noise.std
    assert "std" in (tmp_path / "controls.txt").read_text()
