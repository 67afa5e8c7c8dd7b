"""Pitfalls of signatures: ``*args`` and ``**kwargs``, and annotations that are not types."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import torchbend as tb
from tests.conftest import assert_same, clone
from tests.tracing.test_pitfalls import check_calls

x4 = torch.randn(2, 4)

# -- **kwargs: inputs given by name ----------------------------------------------------------------


class Extras(nn.Module):
    """``forward(self, x, *args, **kwargs)``, as a music transformer's or a residual wrapper's."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, *args: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        y = self.lin(x)
        for extra in args:
            y = y + extra
        if kwargs.get("scale") is not None:
            y = y * kwargs["scale"]
        return y


class Passes(nn.Module):
    """A bare ``forward(*args, **kwargs)`` passing everything on, as decoder wrappers do."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.inner(*args, **kwargs)

    def inner(self, input_ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        y = self.lin(input_ids)
        return y if mask is None else y * mask


def test_keywords_into_kwargs_trace_by_name():
    check_calls(
        Extras,
        {"x": x4},
        {"x": torch.randn(3, 4)},
        {"x": x4, "scale": torch.randn(2, 4)},
        {"x": x4, "scale": None},
        {"x": x4, "scale": 2.0},
    )
    check_calls(
        Passes,
        {"input_ids": x4},
        {"input_ids": x4, "mask": torch.randn(2, 4)},
        {"input_ids": torch.randn(5, 4)},
    )


def test_kwargs_items_are_named_placeholders_and_refuse_other_names():
    bended = tb.BendedModule(Passes())
    graph = bended.trace(input_ids=x4, mask=x4)
    assert [str(n.target) for n in graph.nodes if n.op == "placeholder"] == ["input_ids", "mask"]
    with pytest.raises(tb.TracingError, match="Python identifiers"):
        bended(**{"input-ids": x4})


# -- *args: positional extras, recorded --------------------------------------------------------


def _calls() -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    y, z = torch.randn(2, 4), torch.randn(2, 4)
    return [
        ((x4, y), {}),
        ((x4,), {}),
        ((x4, y, z), {}),
        ((x4, y), {"scale": 3.0}),
        ((x4, z), {}),
    ]


@pytest.mark.parametrize(
    ("backend", "strict"), [("concrete", False), ("concrete", True), ("export", False)]
)
def test_positional_extras_are_recorded_and_calls_match_them(backend: str, strict: bool):
    """Traced with one positional extra; calls with none, one or two each give what eager
    gives (a graph of their own), and strict mode refuses another number of them."""
    calls = _calls()
    torch.manual_seed(0)
    module = Extras()
    bended = tb.BendedModule(module, backend=backend, strict=strict)
    graph = bended.trace("forward", *clone(calls[0][0]))
    assert [str(n.target) for n in graph.nodes if n.op == "placeholder"] == ["x", "args_0"]
    for i, (args, kwargs) in enumerate(calls):
        expected = module(*clone(args), **kwargs)
        if strict and i in (1, 2, 3):  # other inputs than traced
            with pytest.raises(tb.GuardError, match=r"args_|scale"):
                bended(*clone(args), **kwargs)
            continue
        assert_same(bended(*clone(args), **kwargs), expected, path=f"call {i}")


def test_positional_extras_by_name():
    """``args=(...)`` (the ``*args`` parameter's name) and ``args_0=`` give the extras by
    name, as callers that give inputs by name only do; mistakes are refused by name."""
    module, y, z = Extras(), torch.randn(2, 4), torch.randn(2, 4)
    bended = tb.BendedModule(module)
    bended.trace(x=x4, args=(y, z))
    assert_same(bended(x4, y, z), module(x4, y, z))
    assert_same(bended(x4, args_0=y, args_1=z), module(x4, y, z))
    got = bended.get_activations("lin", x=x4, args=(y, z))
    assert_same(got["lin"], module.lin(x4))
    with pytest.raises(tb.TracingError, match="without a gap"):
        bended(x4, args_1=z)
    with pytest.raises(tb.TracingError, match="both by position and by name"):
        bended(x4, y, args=(z,))
    with pytest.raises(tb.TracingError, match="as a tuple"):
        bended(x4, args=y)


def test_positional_extras_of_a_bare_signature_and_their_export():
    """``forward(*args, **kwargs)`` given positionally binds ``args_0``; a TorchScript export
    of a method with extras takes them as named arguments."""
    module = Passes()
    bended = tb.BendedModule(module)
    assert bended.view().signature("forward").first == "args_0"  # what audio is fed to
    bended.trace("forward", x4)
    assert_same(bended(x4), module(x4))
    assert_same(bended(x4, mask=x4), module(x4, mask=x4))
    extras = tb.BendedModule(Extras())
    y = torch.randn(2, 4)
    extras.trace("forward", x4, y)
    scripted = tb.export.torchscript(extras)
    assert [a.name for a in scripted.forward.schema.arguments] == ["self", "x", "args_0"]
    assert_same(scripted(x4, y), extras.module(x4, y))


def test_positional_extras_passed_on_by_a_real_wrapper():
    """torch-einops-utils' ``Residual.forward(x, *args, **kwargs)`` hands its extras on."""
    nn_utils = pytest.importorskip("torch_einops_utils.nn")

    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
            return self.lin(x) * scale

    module = nn_utils.Residual(Scaled())
    bended = tb.BendedModule(module)
    scale = torch.randn(2, 4)
    bended.trace("forward", x4, scale)
    assert_same(bended(x4, scale), module(x4, scale))
    assert_same(bended(x4, scale=scale), module(x4, scale=scale))


# -- annotations that are not types ---------------------------------------------------------------


class Annotated(nn.Module):
    """Annotations as audio code writes them: a list (torchfcpe's ``sr: [int, float]``), a
    tuple, a number, a string naming nothing importable; and one true type."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(
        self,
        x: torch.Tensor,
        sr: [int, float],  # type: ignore[valid-type]
        gain: (int, float) = 1.0,  # type: ignore[valid-type]
        mode: NoSuchType = "a",  # type: ignore[name-defined]  # noqa: F821
        bias: 3 = 0.0,  # type: ignore[valid-type]
    ) -> torch.Tensor:
        y = self.lin(x) * sr * gain + bias
        return y if mode == "a" else -y


def test_annotations_that_are_not_types_are_dropped():
    bended = tb.BendedModule(Annotated(), backend="concrete")
    graph = bended.trace(x=x4, sr=16000)
    types = {str(n.target): n.type for n in graph.nodes if n.op == "placeholder"}
    assert types == {"x": torch.Tensor, "sr": None, "gain": None, "mode": None, "bias": None}
    compile(graph.python_code("self").src, "<graph>", "exec")
    assert "placeholder" in str(graph)
    gm = bended.view().current("forward").gm
    assert gm is not None
    gm.recompile()
    scripted = tb.export.torchscript(bended)
    assert_same(scripted(x4, 16000), bended(x=x4, sr=16000))
    check_calls(
        Annotated,
        {"x": x4, "sr": 16000},
        {"x": x4, "sr": 22050.0},
        {"x": x4, "sr": 8000, "mode": "b", "gain": 2},
        backend="concrete",
    )
