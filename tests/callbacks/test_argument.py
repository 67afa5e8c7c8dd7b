"""Tests of torchbend.callbacks.argument: declared arguments, their checks, controls, ramps."""

from __future__ import annotations

import copy
import gc
import pickle

import pytest
import torch
from callback_helpers import ACT, CPU

from torchbend.callbacks import Argument, BendingCallback, Erode, Mask, Scale
from torchbend.callbacks.argument import declared
from torchbend.controls import BendingParameter
from torchbend.errors import BendingError


class Knobs(BendingCallback):
    """One argument of each kind, to test the declarations."""

    gain = Argument(float, low=0.0, high=2.0, neutral=1.0, meaning="a factor", ramps=True)
    size = Argument(int, low=1, high=8, neutral=1)
    on = Argument(bool, neutral=False)
    level = Argument(float, none="no level", finite=False, derives=True)

    def __init__(self, gain=1.0, size=1, on=False, level=None) -> None:
        super().__init__()
        self.gain = gain
        self.size = size
        self.on = on
        self.level = level
        self.derived = 0

    def control_changed(self) -> None:
        self.derived += 1

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return x * self.along("gain", x)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gain": 3.0}, "Knobs: gain is a factor and must be between 0 and 2, got 3.0"),
        ({"gain": float("nan")}, "Knobs: gain is a factor and must be between 0 and 2, got nan"),
        ({"gain": "a"}, "Knobs: gain is a factor .* got 'a'"),
        ({"size": 0}, "Knobs: size must be an int >= 1, got 0"),
        ({"size": 1.5}, "Knobs: size must be an int >= 1, got 1.5"),
        ({"size": True}, "Knobs: size must be an int >= 1, got True"),
        ({"size": 9}, "Knobs: size must be at most 8, got 9"),
        ({"on": 2}, "Knobs: on must be True or False, got 2"),
        ({"level": float("nan")}, r"Knobs: level must be a number or None \(no level\), got nan"),
    ],
)
def test_numbers_are_checked_against_the_declaration(kwargs, message):
    with pytest.raises(BendingError, match=message):
        Knobs(**kwargs)


def test_checked_numbers_are_kept_as_plain_attributes_of_their_kind():
    knobs = Knobs(gain=2, size=3.0, on=1, level=float("-inf"))
    assert (knobs.gain, knobs.size, knobs.on, knobs.level) == (2.0, 3, True, float("-inf"))
    assert [type(v) for v in (knobs.gain, knobs.size, knobs.on)] == [float, int, bool]
    assert Knobs().level is None
    assert repr(knobs) == "Knobs(gain=2.0, size=3, on=True, level=-inf)"


def test_a_control_is_checked_by_its_value_then_refuses_values_out_of_bounds():
    with pytest.raises(BendingError, match="gain is a factor and must be between 0 and 2, got 5"):
        Knobs(gain=BendingParameter("g", 5.0))
    g = BendingParameter("g", 1.5)
    n = BendingParameter("n", 3)
    knobs = Knobs(gain=g, size=2 * n)
    assert (knobs.gain, knobs.size) == (1.5, 6)
    with pytest.raises(
        BendingError,
        match=r"control 'g': 7.0 would make Knobs.gain 7.0, but gain is a factor and must be "
        r"between 0 and 2; give 'g' a value between 0 and 2, or make the control clamp",
    ):
        g.set(7.0)
    # Through a view: the bound is on 2 * n, the advice on n (whole, for an int control).
    with pytest.raises(
        BendingError, match=r"control 'n': 5 would make Knobs.size 10.0, .* between 1 and 4,"
    ):
        n.set(5)
    assert (g.get(), n.get(), knobs.gain, knobs.size) == (1.5, 3, 1.5, 6)
    n.set(2)
    assert knobs.size == 4 and type(knobs.size) is int
    assert knobs.controls() == [g, n]
    assert knobs.arguments()["gain"] is g


def test_a_control_that_clamps_is_brought_into_the_bounds_of_every_argument_it_drives():
    c = BendingParameter("c", 0.5, range=(-10.0, 10.0), clamp=True)
    knobs = Knobs(gain=1 - c)  # gain in [0, 2]: c in [-1, 1]
    mask = Mask(prob=c)  # prob in [0, 1]: c in [0, 1]
    c.set(7.0)
    assert (c.get(), knobs.gain, mask.prob) == (1.0, 0.0, 1.0)
    c.set(-3.0)
    assert (c.get(), knobs.gain, mask.prob) == (0.0, 1.0, 0.0)


def test_bounds_go_with_the_argument_and_the_callback_and_copy_with_them():
    g = BendingParameter("g", 1.0)
    knobs = Knobs(gain=g)
    again, unpickled = copy.deepcopy(knobs), pickle.loads(pickle.dumps(knobs))
    for copied in (again.controls()[0], unpickled.controls()[0]):
        with pytest.raises(BendingError, match=r"would make Knobs\.gain 3\.0"):
            copied.set(3.0)
    assert copy.deepcopy(g).bounds() == [] and pickle.loads(pickle.dumps(g)).bounds() == []
    knobs.gain = 0.5  # a number in place of the control: its bound goes
    g.set(3.0)
    g.set(1.0)
    knobs.gain = g
    with pytest.raises(BendingError, match=r"would make Knobs\.gain -1\.0"):
        g.set(-1.0)
    del knobs
    gc.collect()
    g.set(-1.0)  # the callback is gone, and its bound with it
    assert g.bounds() == []


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Scale("2"), r"Scale: scale must be a finite number, got '2'"),
        (lambda: Scale(True), r"Scale: scale must be a finite number, got True"),
        (lambda: Scale(10**400), r"Scale: scale must be a finite number, got 1000"),
        (lambda: Knobs(size="2"), r"Knobs: size must be an int >= 1, got '2'"),
        (lambda: Knobs(on="1"), r"Knobs: on must be True or False, got '1'"),
        (lambda: Mask(seed=2**64), r"Mask: seed must be an int of 64 bits .*, got 18446744"),
        (lambda: Mask(seed=-(2**64)), r"Mask: seed must be an int of 64 bits .*, got -18446"),
        (lambda: Erode(10**20), r"Erode: size is a window in samples and must be at most 65536"),
    ],
)
def test_numbers_are_real_numbers_of_the_declared_kind_and_size(build, message):
    with pytest.raises(BendingError, match=message):
        build()


def test_a_control_cannot_drive_an_int_argument_beyond_64_bits():
    seed = BendingParameter("seed", 0)
    mask = Mask(prob=0.5, seed=seed)
    with pytest.raises(BendingError, match=r"would make Mask\.seed 1\.8446744073709552e\+19"):
        seed.set(2**64)
    seed.set(2**62)
    assert mask.seed == 2**62


def test_only_arguments_that_derive_state_call_control_changed():
    gain, level = BendingParameter("gain", 1.0), BendingParameter("level", 0.5)
    knobs = Knobs(gain=gain, level=level)
    knobs.register(ACT, torch.Size([3]), torch.float32, CPU)
    gain.set(2.0)
    assert knobs.derived == 0
    level.set(0.25)
    level.set(0.25)  # unchanged: nothing to derive
    assert knobs.derived == 1
    knobs.level = 1.0  # set directly once registered: derived too
    assert knobs.derived == 2


def test_a_number_in_place_of_a_control_stops_its_pushes():
    gain = BendingParameter("gain", 1.0)
    knobs = Knobs(gain=gain)
    knobs.gain = 0.5
    gain.set(2.0)
    assert knobs.gain == 0.5 and knobs.controls() == [] and gain.readers() == []


def test_a_control_driving_two_arguments_stays_attached_while_one_reads_it():
    p = BendingParameter("p", 1.0)
    knobs = Knobs(gain=p, level=p)
    knobs.level = None
    p.set(2.0)
    assert knobs.gain == 2.0 and p.readers() == [knobs]


def test_ramps_are_pushed_per_call_and_read_along_time():
    gain = BendingParameter("gain", 0.0, ramp=2)
    knobs = Knobs(gain=gain)
    gain.set(2.0)
    assert knobs._ramps["gain"] == (0.0, 1.0, 2.0) and knobs.gain == 2.0
    along = knobs.along("gain", torch.ones(4))
    assert isinstance(along, torch.Tensor)
    assert torch.equal(along, torch.tensor([0.25, 0.5, 0.75, 1.0]))
    gain.advance()
    assert knobs._ramps["gain"] == (1.0, 2.0, 2.0)
    gain.advance()
    assert knobs.along("gain", torch.ones(4)) == 2.0


def test_along_refuses_an_argument_that_does_not_ramp():
    with pytest.raises(BendingError, match=r"no argument 'size' read along time"):
        Knobs().along("size", torch.ones(3))


def test_a_tensor_input_reaches_arguments_that_ramp_only():
    gain = BendingParameter("gain", 1.0)
    knobs = Knobs(gain=gain)
    with gain.tensor_input(torch.tensor(3.0)):
        assert torch.equal(knobs.along("gain", torch.ones(2)), torch.tensor(2.0))  # bounded
    assert knobs.gain == 1.0 and knobs.along("gain", torch.ones(2)) == 1.0
    size = BendingParameter("size", 2.0)
    knobs = Knobs(size=size)
    with pytest.raises(BendingError, match="size takes numbers, not a tensor input"):
        with size.tensor_input(torch.tensor(3.0)):
            pass
    assert knobs.size == 2


def test_copies_follow_copies_of_their_controls():
    gain = BendingParameter("gain", 1.0)
    knobs = Knobs(gain=gain)
    again = copy.deepcopy(knobs)
    copied = again.controls()[0]
    assert copied is not gain
    copied.set(0.5)
    gain.set(2.0)
    assert (again.gain, knobs.gain) == (0.5, 2.0)


def test_controls_hold_their_readers_weakly():
    gain = BendingParameter("gain", 1.0)
    Scale(gain)
    gc.collect()
    assert gain.readers() == []


def test_mistakes_in_declarations_and_subclasses_are_named():
    with pytest.raises(BendingError, match="only float arguments ramp"):
        Argument(int, ramps=True)
    with pytest.raises(BendingError, match="a bool argument has no bounds"):
        Argument(bool, low=0)
    with pytest.raises(BendingError, match="a float, an int or a bool"):
        Argument(str)

    class Early(BendingCallback):
        gain = Argument(float)

        def __init__(self) -> None:
            self.gain = 1.0
            super().__init__()

    with pytest.raises(BendingError, match=r"Early: call super\(\).__init__\(\) before"):
        Early()

    class Forgot(BendingCallback):
        gain = Argument(float)

    with pytest.raises(AttributeError):
        Forgot().gain


def test_declarations_are_inherited_and_shown():
    assert list(declared(Mask)) == ["seed", "prob"]
    assert repr(Mask.prob) == (
        "Argument(float, low=0.0, high=1.0, neutral=0.0, "
        "meaning='the probability of zeroing an element', derives=True)"
    )
