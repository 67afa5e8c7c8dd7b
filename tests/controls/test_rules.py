"""Tests of torchbend.controls.rules: each rule gives the same result eagerly and scripted (what
an exported file runs), bit for bit, over a grid of values and their edges."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import torch

from torchbend.callbacks.argument import INT_MAX, INT_MIN
from torchbend.controls import rules

FLOATS = [0.0, -0.0, 0.25, -1.0, 1.0, 0.1, 0.7, 1e-300, 3.0e38, -7.5, math.inf, -math.inf, math.nan]
"""Floats with edges: signed zeros, tiny and huge values, infinities, NaN."""
BOUNDS: list[float | None] = [None, 0.0, -1.0, 1.0, 0.5, float(INT_MIN), float(INT_MAX)]
INTS = [0, 1, -1, 7, 2**53 + 1, INT_MIN, INT_MAX]
INT_BOUNDS: list[int | None] = [None, 0, -1, 5, INT_MIN, INT_MAX]
RAMPS = [1, 2, 3, 7, 1 << 16]


def same(a: Any, b: Any) -> bool:
    """Equal bit for bit: NaN equals NaN, 0.0 differs from -0.0, tuples item by item."""
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return type(a) is type(b) and a == b


def check(fn: Callable[..., Any], grid: Iterable[tuple[Any, ...]]) -> int:
    """Compare ``fn`` eager and scripted on every argument tuple of ``grid``; how many."""
    scripted = torch.jit.script(fn)
    count = 0
    for args in grid:
        eager, compiled = fn(*args), scripted(*args)
        assert same(eager, compiled), (fn.__name__, args, eager, compiled)
        count += 1
    return count


def test_every_rule_is_tested_here():
    untested = [n for n in rules.__all__ if f"test_{n}_is_the_same_scripted" not in globals()]
    assert not untested, f"add test_<rule>_is_the_same_scripted for {untested}"


def test_call_range_is_the_same_scripted():
    values = [0.0, 1.0, -2.5, 0.1, 0.7, 1e300, -0.0]
    steps = [0, 1, 2, 3, 6, 7, 8, (1 << 16) - 1, 1 << 16]
    grid = [
        (start, value, step, ramp)
        for start, value in itertools.product(values, values)
        for ramp in RAMPS
        for step in steps
    ]
    assert check(rules.call_range, grid) == len(grid)


def test_call_range_ends_at_the_value():
    assert rules.call_range(0.0, 1.0, 3, 3) == (1.0, 1.0)  # at rest
    assert rules.call_range(0.0, 1.0, 0, 4) == (0.0, 0.25)
    assert rules.call_range(0.0, 1.0, 3, 4) == (0.75, 1.0)


def test_fade_weight_is_the_same_scripted():
    grid = [(step, ramp) for ramp in RAMPS for step in range(0, 9)]
    assert check(rules.fade_weight, grid) == len(grid)
    assert rules.fade_weight(0, 4) == 0.25 and rules.fade_weight(9, 4) == 1.0


def test_viewed_is_the_same_scripted():
    scales = [1.0, -1.0, 2.0, 0.0, 0.5, -3.0]
    offsets = [0.0, -0.0, 1.0, -0.5, 1e308]
    grid = list(itertools.product(FLOATS, scales, offsets))
    assert check(rules.viewed, grid) == len(grid)


def test_admits_is_the_same_scripted():
    views = [(1.0, 0.0), (2.0, 0.0), (-1.0, 1.0), (0.0, 0.5), (0.5, -0.25), (1e308, 1e308)]
    grid = [
        (value, low, high, finite, scale, offset)
        for value in FLOATS
        for low, high in itertools.product(BOUNDS, BOUNDS)
        for finite in (True, False)
        for scale, offset in views
    ]
    assert check(rules.admits, grid) == len(grid)


def test_admits_refuses_nan_and_infinities_of_finite_arguments():
    assert not rules.admits(math.nan, None, None, False, 1.0, 0.0)
    assert not rules.admits(math.inf, None, None, True, 1.0, 0.0)
    assert rules.admits(math.inf, None, None, False, 1.0, 0.0)
    assert not rules.admits(1e308, None, None, True, 10.0, 0.0)  # the view overflows
    assert rules.admits(1.0, 1.0, 1.0, True, 1.0, 0.0)  # bounds included
    assert not rules.admits(0.5, None, 1.5, True, 2.0, 0.6)


def test_float_argument_is_the_same_scripted():
    grid = [
        (value, low, high) for value in FLOATS for low, high in itertools.product(BOUNDS, BOUNDS)
    ]
    assert check(rules.float_argument, grid) == len(grid)


def test_int_argument_is_the_same_scripted():
    grid = [
        (value, low, high)
        for value in INTS
        for low, high in itertools.product(INT_BOUNDS, INT_BOUNDS)
    ]
    assert check(rules.int_argument, grid) == len(grid)


def test_bool_argument_is_the_same_scripted():
    grid = [(value,) for value in FLOATS]
    assert check(rules.bool_argument, grid) == len(grid)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64])
def test_ramp_along_is_the_same_scripted(dtype):
    scripted = torch.jit.script(rules.ramp_along)
    for length in (1, 2, 3, 64):
        x = torch.zeros(2, length, dtype=dtype)
        for start, end in [(0.0, 1.0), (1.0, 0.0), (0.25, 0.75), (-2.0, 3.0), (0.5, 0.5)]:
            eager = rules.ramp_along(start, end, x)
            assert torch.equal(eager, scripted(start, end, x))
            assert eager.shape == (length,) and eager[-1].item() == pytest.approx(end, rel=1e-2)


TEXTS = [
    "0.000000",
    "1.000000",
    "-2.500000",
    "2.700000",
    "+.5",
    "7",
    "0",
    "-0.000000",
    "1" * 400,
    "true",
    "FALSE",
    "On",
    "off",
    "yes",
    "no",
    "saw",
    "Saw",
    "",
    ".",
    "-",
    "1e3",
    "nan",
    "inf",
    "1.2.3",
    " 1",
    "0x1",
]
"""Texts a host may send: numbers as nn~ formats them (std::to_string), words, and near misses."""


def test_number_from_text_is_the_same_scripted():
    assert check(rules.number_from_text, [(t,) for t in TEXTS]) == len(TEXTS)
    assert rules.number_from_text("-2.500000") == -2.5 and rules.number_from_text("1e3") is None


def test_bool_from_text_is_the_same_scripted():
    assert check(rules.bool_from_text, [(t,) for t in TEXTS]) == len(TEXTS)
    read = {t: rules.bool_from_text(t) for t in ("0.000000", "-0.000000", "0.500000", "On", "no")}
    assert read == {"0.000000": 0, "-0.000000": 0, "0.500000": 1, "On": 1, "no": 0}
    assert rules.bool_from_text("saw") == -1


def test_choice_from_text_is_the_same_scripted():
    choices = ["sine", "square", "saw"]
    assert check(rules.choice_from_text, [(t, choices) for t in TEXTS]) == len(TEXTS)
    read = [rules.choice_from_text(t, choices) for t in ("saw", "2.700000", "3.000000", "Saw")]
    assert read == [2, 2, -1, -1]


def test_resampled_is_the_same_scripted():
    scripted = torch.jit.script(rules.resampled)
    for values, length in [
        (torch.arange(5.0), 3),
        (torch.arange(5.0), 5),
        (torch.tensor([2.0]), 4),
        (torch.linspace(-1.0, 1.0, 100)[None], 7),
        (torch.arange(3, dtype=torch.float64), 9),
    ]:
        eager = rules.resampled(values, length)
        assert eager.dtype == torch.float32 and eager.shape == (length,)
        assert torch.equal(eager, scripted(values, length))
        assert eager[0] == values.flatten()[0] and eager[-1] == values.flatten()[-1]
    assert rules.resampled(torch.arange(5.0), 3).tolist() == [0.0, 2.0, 4.0]


def test_tensor_from_buffer_is_the_same_scripted():
    scripted = torch.jit.script(rules.tensor_from_buffer)
    stereo = torch.stack([torch.arange(4.0), torch.full((4,), 9.0)])
    for values, length, expected in [
        (torch.arange(4.0)[None], 4, [0.0, 1.0, 2.0, 3.0]),
        (stereo, 4, [0.0, 1.0, 2.0, 3.0]),  # the first channel
        (torch.arange(3.0), 5, [0.0, 0.5, 1.0, 1.5, 2.0]),
        (torch.tensor([[1.0, math.nan]]), 2, None),
        (torch.tensor([[1.0, math.inf]]), 2, None),
        (torch.zeros(1, 0), 2, None),
    ]:
        for fn in (rules.tensor_from_buffer, scripted):
            got = fn(values, length)
            assert (got if got is None else got.tolist()) == expected, (values, length)
