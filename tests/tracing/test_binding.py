"""Inputs by name for signatures with ``*args`` and ``**kwargs``, and annotations as types."""

from __future__ import annotations

import inspect
from typing import Any, Optional

import torch

from torchbend.tracing.binding import extra_index, extras_of, spread
from torchbend.tracing.placeholders import parameter_types


def _params(fn: Any) -> list[inspect.Parameter]:
    return list(inspect.signature(fn).parameters.values())


def f(a, b=1, /, c=2, *rest, d, **options):  # type: ignore[no-untyped-def]
    return a, b, c, rest, d, options


def test_extras_are_named_by_position_and_spread_back_as_a_call():
    params = _params(f)
    inputs = {"a": 0, "b": 1, "c": 2, "rest_0": 3, "rest_1": 4, "d": 5, "e": 6}
    assert extras_of(params, list(inputs)) == (["rest_0", "rest_1"], ["e"])
    args, kwargs = spread(params, inputs)
    assert f(*args, **kwargs) == (0, 1, 2, (3, 4), 5, {"e": 6})
    args, kwargs = spread(params, {"a": 0, "d": 5})  # defaults left to Python
    assert f(*args, **kwargs) == (0, 1, 2, (), 5, {})
    assert [extra_index("rest", n) for n in ("rest_0", "rest_12", "rest_01", "rest", "d")] == [
        0,
        12,
        None,
        None,
        None,
    ]


def test_parameter_types_keep_types_and_drop_the_rest():
    def g(
        x: torch.Tensor,
        sr: [int, float],  # type: ignore[valid-type]
        n: Optional[int],  # noqa: UP045
        k: list[int],
        s: NotImportable,  # type: ignore[name-defined]  # noqa: F821
        t: tuple[int, ...],
        u: 3,  # type: ignore[valid-type]
    ) -> None:
        pass

    assert parameter_types(g) == {
        "x": torch.Tensor,
        "n": Optional[int],  # noqa: UP045
        "k": list[int],
        "t": tuple[int, ...],
    }
