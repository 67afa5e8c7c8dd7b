"""Pitfalls of issue 31: cache objects built in forward, and exports whose dynamic sizes fail."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchbend as tb
from tests.tracing.test_pitfalls import check_calls
from tests.tracing.test_pitfalls_modules import _tiny_llama
from torchbend.tracing.backends import exported

# -- a cache object built in forward and returned (transformers' DynamicCache) ---------------


class Layer:
    """One layer's keys and values, appended to along the sequence."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.keys = k if self.keys is None else torch.cat([self.keys, k], 1)
        self.values = v if self.values is None else torch.cat([self.values, v], 1)
        return self.keys, self.values

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Layer)
            and torch.equal(self.keys, other.keys)
            and torch.equal(self.values, other.values)
        )


class Cache:
    """A plain object (not a dataclass, not a pytree) holding a list of layer objects."""

    def __init__(self) -> None:
        self.layers: list[Layer] = []

    def update(self, k: torch.Tensor, v: torch.Tensor, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        while len(self.layers) <= i:
            self.layers.append(Layer())
        return self.layers[i].update(k, v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cache) and self.layers == other.layers


class CachedAttention(nn.Module):
    """Two attention layers filling a cache it returns, as an LLM called with its defaults."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.ModuleList(nn.Linear(4, 12) for _ in range(2))

    def forward(self, x, use_cache=True):
        cache = Cache() if use_cache else None
        for i, qkv in enumerate(self.qkv):
            q, k, v = qkv(x).chunk(3, -1)
            if cache is not None:
                k, v = cache.update(k, v, i)
            x = x + F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return {"hidden": x, "cache": cache}


def test_a_cache_object_built_in_forward_is_rebuilt_from_the_graph():
    x = torch.randn(1, 5, 4)
    check_calls(
        CachedAttention,
        {"x": x},
        {"x": torch.randn(1, 3, 4)},
        {"x": torch.randn(2, 7, 4)},
        {"x": x, "use_cache": False},
    )


def test_a_cache_object_built_in_forward_is_rebuilt_from_an_exported_program():
    x = torch.randn(1, 5, 4)
    check_calls(CachedAttention, {"x": x}, {"x": torch.randn(1, 3, 4)}, backend="export")


def test_a_bent_activation_moves_the_cache_and_reset_is_bit_exact():
    torch.manual_seed(0)
    bended = tb.BendedModule(CachedAttention())
    x = torch.randn(1, 5, 4)
    bended.trace(x=x)
    plain = bended(x=x)
    bended.bend(tb.Scale(0.0), "qkv_0$")
    bent = bended(x=x)
    assert not torch.equal(bent["cache"].layers[0].keys, plain["cache"].layers[0].keys)
    bended.reset()
    again = bended(x=x)
    assert again["cache"] == plain["cache"] and torch.equal(again["hidden"], plain["hidden"])


class CacheIn(nn.Module):
    def forward(self, x, cache):
        return x + cache.layers[0].keys.sum()


@pytest.mark.parametrize("backend", ["concrete", "export"])
def test_a_cache_object_passed_in_is_refused_clearly(backend):
    cache = Cache()
    cache.update(torch.ones(1, 2, 4), torch.ones(1, 2, 4), 0)
    with pytest.raises(tb.TracingError, match=r"'cache' is a Cache holding tensors"):
        tb.BendedModule(CacheIn(), backend=backend).trace(x=torch.randn(3), cache=cache)
    assert type(cache.layers[0].keys) is torch.Tensor  # not written to by the trace


# -- an export whose dynamic sizes fail: static sizes, guarded ------------------------------


def test_a_failure_reading_the_dynamic_program_falls_back_to_static_sizes(monkeypatch):
    """Whatever fails after torch.export returns (``module()``, the rebuild, the guards), as
    its symbolic-shape solver may on chunking arithmetic: static sizes, each one a fact."""
    rebuild = exported.rebuild_program

    def fails_on_symbolic_sizes(gm, *args, **kwargs):
        sizes = [n.meta["val"].shape for n in gm.graph.nodes if n.op == "placeholder"]
        if any(not isinstance(d, int) for shape in sizes for d in shape):
            raise RuntimeError("a solver error on symbolic sizes")
        return rebuild(gm, *args, **kwargs)

    monkeypatch.setattr(exported, "rebuild_program", fails_on_symbolic_sizes)
    x = torch.randn(2, 6, 3)
    check_calls(
        lambda: nn.Sequential(nn.Linear(3, 3), nn.Softmax(1)),
        {"input": x},
        {"input": torch.randn(2, 5, 3)},
        backend="export",
    )


def test_both_exports_failing_names_both(monkeypatch):
    def refuses(*args, **kwargs):
        raise RuntimeError("no export today")

    monkeypatch.setattr(torch.export, "export", refuses)
    with pytest.raises(
        tb.TracingError, match=r"with dynamic sizes, .*no export today; with static"
    ):
        tb.BendedModule(nn.Linear(3, 3), backend="export").trace(input=torch.randn(2, 3))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["concrete", "export"])
def test_llama_called_with_its_defaults_returns_the_cache_eager_returns(backend):
    torch.manual_seed(0)
    model = _tiny_llama()
    ids = torch.randint(0, 50, (1, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        eager = model(input_ids=ids)
        bended = tb.BendedModule(model, backend=backend)
        bended.trace(input_ids=ids)
        got = bended(input_ids=ids)
    assert type(got.past_key_values) is type(eager.past_key_values)
    torch.testing.assert_close(got.logits, eager.logits)
    for mine, theirs in zip(got.past_key_values.layers, eager.past_key_values.layers, strict=True):
        torch.testing.assert_close(mine.keys, theirs.keys)
        torch.testing.assert_close(mine.values, theirs.values)
    assert got.past_key_values.get_seq_length() == 6


class NoneBetween(nn.Module):
    """An argument left ``None`` between two given ones (an encoder-decoder's
    ``attention_mask`` between ``input_features`` and ``decoder_input_ids``)."""

    def forward(self, x, mask=None, y=None):
        return x * 2 + (0 if y is None else y.sum())


def test_the_export_backend_names_the_inputs_around_a_none_between_them():
    check_calls(
        NoneBetween,
        {"x": torch.randn(2, 3), "y": torch.randn(4)},
        {"x": torch.randn(3, 3), "y": torch.randn(5)},
        backend="export",
    )
