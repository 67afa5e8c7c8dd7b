"""Shared test fixtures: a zoo of small modules that are hard to trace, and the traced check.

Every zoo entry names a module, the example inputs it is traced on, extra inputs to call it with
afterwards (other shapes or values, which may take other decisions and force a new trace), and
whether plain ``torch.fx.symbolic_trace`` fails on it (raises, or gives a graph whose outputs
differ from eager). ``scripts/zoo_table.py`` writes the table of ``docs/tracing.md`` from it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from math import sqrt
from typing import Any
from unittest import mock

import pytest
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

import torchbend as tb
from torchbend.tracing import BendingTracer

# The sound-card tests play to ALSA's null device, on a machine without a sound card too,
# whatever CI or ~/.asoundrc say. Set before PortAudio starts (sounddevice is imported later,
# inside the tests), and inherited by the commands the tests run as subprocesses.
os.environ["ALSA_CONFIG_PATH"] = os.path.join(os.path.dirname(__file__), "alsa_null.conf")

# Under pytest-xdist (scripts/check.sh runs one worker a core), each worker computes on one
# thread, and so do the commands it starts: two workers of two threads each on two cores spend
# their time waiting for each other's threads.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

__all__ = [
    "ZOO",
    "ZooEntry",
    "assert_same",
    "check_traced",
    "clone",
    "count_traces",
    "fx_failure",
]


# -- the check -------------------------------------------------------------------------------


def assert_same(got: Any, expected: Any, atol: float = 0.0, rtol: float = 0.0, path: str = "out"):
    """Assert that two outputs are equal: nested containers, tensors, dataclasses, distributions.

    Tensors must match in dtype and shape, and in values exactly unless ``atol``/``rtol`` are
    given. Distributions are compared by type and parameters.
    """
    assert type(got) is type(expected), f"{path}: {type(got).__name__} != {type(expected).__name__}"
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected, atol=atol, rtol=rtol, equal_nan=True, msg=path)
    elif isinstance(expected, torch.distributions.Distribution):
        assert got.batch_shape == expected.batch_shape, f"{path}.batch_shape"
        assert got.event_shape == expected.event_shape, f"{path}.event_shape"
        for name in type(expected).arg_constraints:
            if name in vars(expected):
                assert_same(
                    getattr(got, name), getattr(expected, name), atol, rtol, f"{path}.{name}"
                )
    elif isinstance(expected, Mapping):
        assert list(got.keys()) == list(expected.keys()), f"{path}: keys differ"
        for key in expected:
            assert_same(got[key], expected[key], atol, rtol, f"{path}[{key!r}]")
        if dataclasses.is_dataclass(expected):
            _assert_fields(got, expected, atol, rtol, path)
    elif dataclasses.is_dataclass(expected):
        _assert_fields(got, expected, atol, rtol, path)
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), f"{path}: length {len(got)} != {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, atol, rtol, f"{path}[{i}]")
    elif isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(got), f"{path}: {got} is not nan"
    else:
        assert got == expected, f"{path}: {got!r} != {expected!r}"


def _assert_fields(got: Any, expected: Any, atol: float, rtol: float, path: str) -> None:
    for f in dataclasses.fields(expected):
        assert_same(getattr(got, f.name), getattr(expected, f.name), atol, rtol, f"{path}.{f.name}")


def clone(value: Any) -> Any:
    """A copy of ``value`` whose tensors (in lists, tuples and dicts) are cloned."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(clone(v) for v in value)
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    return value


def _state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def check_traced(
    module: nn.Module,
    inputs: Mapping[str, Any],
    extra: tuple[Mapping[str, Any], ...] = (),
    *,
    atol: float = 0.0,
    rtol: float = 0.0,
    seed: int = 0,
) -> tb.BendedModule:
    """Check that ``module`` traced by torchbend behaves as eager ``module``.

    Traces ``module`` on ``inputs``, then calls it on ``inputs`` and on each of ``extra`` (which
    may force new traces), twice each, next to an eager copy under the same seed, and checks:
    the outputs (and those the trace returned), the random numbers drawn (the generator state
    after the call), the module's state (buffers updated in forward), the inputs (modified
    in place), and that a call whose inputs a graph fits is not traced again.
    Returns the :class:`~torchbend.BendedModule`.
    """
    eager = copy.deepcopy(module)
    bended = tb.BendedModule(module)
    with count_traces() as traces:
        torch.manual_seed(seed)
        _, traced_out = bended.trace(**clone(dict(inputs)), return_out=True)
        for i, call in enumerate((inputs, *extra)):
            for again in (False, True):
                where = ("inputs" if i == 0 else f"extra[{i - 1}]") + (" again" if again else "")
                before = traces[0]
                eager_in, bended_in = clone(dict(call)), clone(dict(call))
                torch.manual_seed(seed)
                expected = eager(**eager_in)
                eager_rng = torch.get_rng_state()
                torch.manual_seed(seed)
                got = bended(**bended_in)
                assert torch.equal(torch.get_rng_state(), eager_rng), (
                    f"{where}: random draws differ"
                )
                assert_same(got, expected, atol, rtol, path=f"{where}: out")
                if i == 0 and not again:
                    assert_same(traced_out, expected, atol, rtol, path="trace(): out")
                assert_same(bended_in, eager_in, atol, rtol, path=f"{where}: inputs after the call")
                assert_same(_state(module), _state(eager), atol, rtol, path=f"{where}: state")
                if again or i == 0:
                    assert traces[0] == before, f"{where}: traced again, though a graph fits"
    return bended


@contextlib.contextmanager
def count_traces() -> Iterator[list[int]]:
    """Count the traces ``BendingTracer`` takes (to check that graphs are reused)."""
    count = [0]
    trace_method = BendingTracer.trace_method

    def counting(self: BendingTracer, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return trace_method(self, *args, **kwargs)

    with mock.patch.object(BendingTracer, "trace_method", counting):
        yield count


def fx_failure(module: nn.Module, inputs: Mapping[str, Any], extra=(), *, atol=0.0, rtol=0.0):
    """How plain ``torch.fx.symbolic_trace`` fails on ``module``: a message, or ``None``.

    It fails when it raises, or when its GraphModule's outputs or random draws differ from
    eager ones on ``inputs`` or ``extra``.
    """
    eager = copy.deepcopy(module)
    try:
        gm = torch.fx.symbolic_trace(copy.deepcopy(module))
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    for i, call in enumerate((inputs, *extra)):
        where = "example inputs" if i == 0 else "other inputs"
        try:
            torch.manual_seed(0)
            expected = eager(**clone(dict(call)))
            rng = torch.get_rng_state()
            torch.manual_seed(0)
            got = gm(**clone(dict(call)))
            assert torch.equal(torch.get_rng_state(), rng), "random draws differ"
            assert_same(got, expected, atol, rtol)
        except AssertionError as e:
            return f"wrong output on {where} ({str(e).splitlines()[0]})"
        except Exception as e:
            return f"fails on {where}: {type(e).__name__}: {str(e).splitlines()[0]}"
    return None


# -- the zoo ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZooEntry:
    """One module of the zoo, with the inputs to trace and call it with."""

    name: str
    factory: Callable[[], nn.Module]
    """Builds the module (called under ``torch.manual_seed(0)``)."""
    inputs: dict[str, Any]
    """Example inputs, by argument name, to trace on."""
    extra: tuple[dict[str, Any], ...]
    """Inputs to call with afterwards: other shapes or values, other decisions."""
    fx_fails: bool
    """Whether plain ``torch.fx.symbolic_trace`` raises or gives wrong outputs."""
    tricky: str
    """What makes the module hard to trace."""
    random: bool = False
    """Whether each call draws new random numbers."""
    atol: float = 0.0
    rtol: float = 0.0
    requires: str | None = None
    """A third-party package the module comes from (the test skips without it)."""

    def module(self) -> nn.Module:
        if self.requires is not None:
            pytest.importorskip(self.requires)
        with torch.random.fork_rng():
            torch.manual_seed(0)
            return self.factory()


_gen = torch.Generator().manual_seed(1234)


def randn(*shape: int) -> torch.Tensor:
    """Deterministic example data (independent of the global seed)."""
    return torch.randn(*shape, generator=_gen)


# Seed notebook (torchbend-extended-tracing) ---------------------------------------------------


class Doug(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv_module = nn.Conv1d(1, 16, 3)
        self.batch_norm = nn.BatchNorm1d(16)

    def forward(self, x: torch.Tensor):
        if x.shape[1] > 1:
            return torch.cat([self.forward(x[:, [i]]) for i in range(x.shape[1])], -1)
        else:
            outs = []
            for i in range(x.shape[0]):
                out_tmp = self.conv_module(x[[i]])
                out_tmp = self.batch_norm(out_tmp)
                outs.append(out_tmp)
            return sum(outs)


class LoopFoo(nn.Module):
    def forward(self, x, n: int):
        for _ in range(n):
            x = x * x
        return x


class LogicalFoo(nn.Module):
    def forward(self, x):
        if x.all():
            return 1
        else:
            return 0


class ShapeFoo(nn.Module):
    def forward(self, x):
        return x * x.shape[0]


class Greg(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv_module = nn.Conv1d(1, 4, 3)

    def forward(self, x):
        return self.conv_module(x)


class Stanley(nn.Module):
    """Recursion on an int argument, with a data-dependent ``if`` at every level."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x, depth: int = 2):
        if depth == 0:
            return x
        y = self.linear(x)
        if y.mean() > 0:
            y = torch.relu(y)
        else:
            y = -y
        return self.forward(y, depth - 1)


# torch.fx documentation: limitations of symbolic tracing --------------------------------------


def func_to_trace(x):
    dim0 = x.size(0)  # the documentation writes x.size[0], a typo
    if dim0 == 3:
        return torch.relu(x)
    else:
        return torch.neg(x)


def f(x, flag):
    if flag:
        return x
    else:
        return x * 2


def normalize(x):
    """Normalize `x` by the size of the batch dimension."""
    return x / sqrt(len(x))


class FuncToTrace(nn.Module):
    def forward(self, x):
        return func_to_trace(x)


class FlagF(nn.Module):
    def forward(self, x, flag: bool):
        return f(x, flag)


class Normalize(nn.Module):
    def forward(self, x):
        return normalize(x)


class MyModuleOnes(nn.Module):
    def forward(self, x):
        return torch.relu(x) + torch.ones(3, 4)


class MyModuleActivation(nn.Module):
    def __init__(self, do_activation: bool = False) -> None:
        super().__init__()
        self.do_activation = do_activation
        self.linear = torch.nn.Linear(512, 512)

    def forward(self, x):
        x = self.linear(x)
        if self.do_activation:
            x = torch.relu(x)
        return x


class MySpecialSubmodule(torch.nn.Module):
    def forward(self, x):
        return torch.neg(x)


class MyModuleLeaf(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 4)
        self.submod = MySpecialSubmodule()

    def forward(self, x):
        return self.submod(self.linear(x))


# Python constructs -----------------------------------------------------------------------------


class ShapeOps(nn.Module):
    """``x.shape``, ``x.size()``, shapes indexed and unpacked, shape arithmetic."""

    def forward(self, x):
        b, c, t = x.shape
        half = x.size(-1) // 2
        y = x.reshape(b, c * t)[:, : c * half]
        return y * x.size()[1] + x.shape[-2:].numel() + x.dim()


class StarShape(nn.Module):
    """A shape slice unpacked into a call: its length is the number of dims."""

    def forward(self, x):
        y = x * 2
        return y.reshape(*y.shape[:-1], 2, -1), len(x.shape)


class RangeOverShape(nn.Module):
    """``range`` over a dimension, returning a list of running sums."""

    def forward(self, x):
        acc = torch.zeros_like(x[0])
        out = []
        for i in range(x.shape[0]):
            acc = acc + x[i]
            out.append(acc)
        return out


class WhileLoop(nn.Module):
    """A ``while`` loop on tensor values; returns the Python count of iterations."""

    def forward(self, x):
        steps = 0
        while x.abs().max() > 1:
            x = x / 2
            steps += 1
        return x, steps


class IterTensor(nn.Module):
    """Iteration over a tensor's rows, and over ``enumerate`` of it."""

    def forward(self, x):
        acc = 0
        for row in x:
            acc = acc + row
        for i, row in enumerate(x):
            acc = acc + i * row
        return acc


class FlipsOnConv(nn.Module):
    """A data-dependent decision on a convolution's output, which bending the convolution (its
    weights, or its output) can flip: the reproducer of issue 26's stale-branch export."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv1d(1, 4, 3, padding=1)

    def forward(self, x):
        h = self.conv(x)
        return torch.tanh(h) if h.mean() > 0 else torch.relu(h) - 0.1


class SumOfList(nn.Module):
    """``sum()`` and ``len()`` of a list of tensors made from an iterated tensor."""

    def forward(self, x):
        parts = list(x.unbind(0))
        return sum(parts) / len(parts)


class InplaceIndex(nn.Module):
    """``y[i] = ...`` in a loop, and an in-place write into the input."""

    def forward(self, x):
        y = torch.zeros_like(x)
        for i in range(x.shape[0]):
            y[i] = x[i] * (i + 1)
        x[0] = 0
        return y


class MathOfInts(nn.Module):
    """``math`` functions of traced ints, read back as Python ints."""

    def forward(self, x):
        k = int(math.log2(x.shape[-1]))
        return x[..., :k] * math.sqrt(k) + math.floor(x.shape[0] / 2)


class ShapeFactories(nn.Module):
    """Deterministic factories, of constant and of traced sizes."""

    def forward(self, x):
        pos = torch.arange(x.shape[-1], dtype=x.dtype)
        return x + torch.zeros(x.shape) + torch.ones(3, 4) + pos + torch.full((x.size(0), 1), 2.0)


class RandomFactories(nn.Module):
    """Random factories without traced arguments (fx bakes one draw in), and with."""

    def forward(self, x):
        return x + torch.randn(4) + torch.rand(x.shape) + 0.1 * torch.randn_like(x)


class RandnLike(nn.Module):
    def forward(self, x):
        return x + 0.1 * torch.randn_like(x)


class Dropouts(nn.Module):
    """``nn.Dropout`` and functional dropout following the training flag."""

    def __init__(self) -> None:
        super().__init__()
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        return F.dropout(self.dropout(x), 0.2, self.training)


class BatchNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.conv(x))


class BufferUpdate(nn.Module):
    """A buffer updated in place by ``forward`` (a running count and sum)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(()))
        self.register_buffer("total", torch.zeros(4))

    def forward(self, x):
        self.count.add_(1)
        self.total.add_(x.sum(0))
        return x - self.total / self.count


class NestedOutputs(nn.Module):
    """Tuples, lists, dicts, ``None``, strings and Python numbers in the output."""

    def forward(self, x):
        return x, [x * 2, None], {"sum": x.sum(), "n": x.shape[0], "name": "nested"}


@dataclass
class Prediction:
    mean: torch.Tensor
    scale: torch.Tensor
    frames: int
    label: str = "prediction"


class DataclassOutput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 8)

    def forward(self, x):
        mean, scale = self.linear(x).chunk(2, -1)
        return Prediction(mean, scale.exp(), x.shape[0])


class NumberOutput(nn.Module):
    """Python numbers read from tensor data and shapes."""

    def forward(self, x):
        return float(x.mean()), len(x), x.abs().max().item()


class ScalarArgs(nn.Module):
    """Python scalar arguments, ``n: int`` and ``scale: float``."""

    def forward(self, x, n: int, scale: float = 0.5):
        return x * n + scale**2 - n // 2


class OptionalInput(nn.Module):
    """An optional tensor argument and a ``None`` output."""

    def forward(self, x, mask=None):
        if mask is not None:
            x = x * mask
        return x, None


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        return x + self.ff(self.norm(x))


class CustomSubmodules(nn.Module):
    """Custom submodules (in a ModuleList and a ModuleDict) traced through."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(8) for _ in range(2))
        self.heads = nn.ModuleDict({"a": nn.Linear(8, 2), "b": nn.Linear(8, 3)})

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return {name: head(x) for name, head in self.heads.items()}


class MultiheadAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        out, weights = self.mha(x, x, x, need_weights=True)
        return out + x, weights


class HandAttention(nn.Module):
    """Causal self-attention written by hand: heads from shapes, a mask of traced size."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        mask = torch.triu(torch.ones((t, t), dtype=torch.bool), diagonal=1)
        attn = scores.masked_fill(mask, float("-inf")).softmax(-1)
        return self.out((attn @ v).transpose(1, 2).reshape(b, t, c))


class LSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 8, num_layers=2, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return out[:, -1], h, c


class GRU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(4, 8)

    def forward(self, x, h0=None):
        return self.gru(x, h0)


class ConvTranspose(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose1d(2, 3, 3, stride=2, padding=1, output_padding=1)
        self.up2 = nn.ConvTranspose1d(3, 3, 3, stride=2, padding=1)

    def forward(self, x):
        y = self.up(x)
        return self.up2(y, output_size=[y.shape[-1] * 2])


class WeightNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        wn = nn.utils.parametrizations.weight_norm
        self.conv = wn(nn.Conv1d(2, 4, 3))
        self.linear = wn(nn.Linear(4, 4), dim=None)

    def forward(self, x):
        return self.linear(self.conv(x).transpose(1, 2))


class SpectralNorm(nn.Module):
    """A spectral-normed layer: in training, each call updates its power-iteration buffers."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.utils.parametrizations.spectral_norm(nn.Linear(6, 6))

    def forward(self, x):
        return self.linear(x)


class NormalOutput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 8)

    def forward(self, x):
        mean, logvar = self.linear(x).chunk(2, -1)
        return torch.distributions.Normal(mean, (0.5 * logvar).exp())


def _train(module: nn.Module) -> nn.Module:
    return module.train()


def _eval(module: nn.Module) -> nn.Module:
    return module.eval()


# transformers models, from tiny configurations with random weights ----------------------------


def gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=2,
        vocab_size=100,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
        use_cache=False,
        attn_implementation="eager",
    )
    return GPT2Model(config).eval()


def wav2vec2() -> nn.Module:
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    config = Wav2Vec2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        conv_dim=(8, 8),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        attn_implementation="eager",
    )
    return Wav2Vec2Model(config).eval()


def encodec() -> nn.Module:
    from transformers import EncodecConfig, EncodecModel

    config = EncodecConfig(
        num_filters=4,
        upsampling_ratios=[2, 2],
        hidden_size=8,
        codebook_size=16,
        codebook_dim=8,
        num_lstm_layers=1,
        target_bandwidths=[16.0],
        sampling_rate=8000,
        kernel_size=3,
        last_kernel_size=3,
        residual_kernel_size=3,
    )
    return EncodecModel(config).eval()


def _ids(*shape: int) -> torch.Tensor:
    return torch.randint(0, 100, shape, generator=_gen)


ZOO: tuple[ZooEntry, ...] = (
    # seed notebook
    ZooEntry(
        name="Doug",
        factory=Doug,
        inputs={"x": randn(1, 1, 16)},
        extra=({"x": randn(1, 2, 16)}, {"x": randn(3, 1, 16)}, {"x": randn(1, 1, 20)}),
        fx_fails=True,
        tricky="recursion on a shape, `range` over shapes, `sum` of a list, batch norm",
    ),
    ZooEntry(
        name="LoopFoo",
        factory=LoopFoo,
        inputs={"x": torch.tensor(2), "n": 4},
        extra=({"x": torch.tensor(3), "n": 2}, {"x": torch.tensor(1.5), "n": 4}),
        fx_fails=True,
        tricky="`range` over an int argument",
    ),
    ZooEntry(
        name="LogicalFoo",
        factory=LogicalFoo,
        inputs={"x": torch.tensor(0)},
        extra=({"x": torch.tensor(1)}, {"x": torch.tensor([1, 1])}, {"x": torch.tensor([1, 0])}),
        fx_fails=True,
        tricky="`if` on tensor values, returns a Python int",
    ),
    ZooEntry(
        name="ShapeFoo",
        factory=ShapeFoo,
        inputs={"x": torch.ones(4)},
        extra=({"x": torch.ones(6)}, {"x": randn(2, 3)}),
        fx_fails=False,
        tricky="arithmetic with a shape",
    ),
    ZooEntry(
        name="Greg",
        factory=Greg,
        inputs={"x": randn(1, 1, 16)},
        extra=({"x": randn(4, 1, 32)},),
        fx_fails=False,
        tricky="a plain convolution",
    ),
    ZooEntry(
        name="Stanley",
        factory=Stanley,
        inputs={"x": randn(2, 4)},
        extra=({"x": randn(2, 4), "depth": 3}, {"x": -randn(3, 4).abs(), "depth": 1}),
        fx_fails=True,
        tricky="recursion on an int argument, data-dependent `if` at each level",
    ),
    # torch.fx documentation
    ZooEntry(
        name="func_to_trace",
        factory=FuncToTrace,
        inputs={"x": randn(3, 4)},
        extra=({"x": randn(4, 4)}, {"x": randn(3, 2)}),
        fx_fails=True,
        tricky="`if x.size(0) == 3`",
    ),
    ZooEntry(
        name="f(x, flag)",
        factory=FlagF,
        inputs={"x": randn(3), "flag": True},
        extra=({"x": randn(3), "flag": False},),
        fx_fails=True,
        tricky="`if` on a bool argument",
    ),
    ZooEntry(
        name="normalize",
        factory=Normalize,
        inputs={"x": randn(3, 4)},
        extra=({"x": randn(5, 4)},),
        fx_fails=True,
        tricky="`sqrt(len(x))`",
    ),
    ZooEntry(
        name="MyModule(ones)",
        factory=MyModuleOnes,
        inputs={"x": randn(3, 4)},
        extra=({"x": randn(2, 3, 4)},),
        fx_fails=False,
        tricky="`torch.ones(3, 4)` (a constant factory)",
    ),
    ZooEntry(
        name="MyModule(do_activation)",
        factory=lambda: MyModuleActivation(True),
        inputs={"x": randn(2, 512)},
        extra=({"x": randn(5, 512)},),
        fx_fails=False,
        tricky="static control flow on an attribute",
    ),
    ZooEntry(
        name="MyModule(MySpecialSubmodule)",
        factory=MyModuleLeaf,
        inputs={"x": randn(2, 3)},
        extra=({"x": randn(3)},),
        fx_fails=False,
        tricky="a custom submodule traced through",
    ),
    # Python constructs
    ZooEntry(
        name="ShapeOps",
        factory=ShapeOps,
        inputs={"x": randn(2, 3, 4)},
        extra=({"x": randn(3, 2, 6)},),
        fx_fails=False,
        tricky="`x.shape` unpacked, `x.size()`, shapes indexed and sliced, `x.dim()`",
    ),
    ZooEntry(
        name="StarShape",
        factory=StarShape,
        inputs={"x": randn(2, 4)},
        extra=({"x": randn(5, 6)}, {"x": randn(3, 2, 4)}),
        fx_fails=True,
        tricky="`reshape(*y.shape[:-1], 2, -1)`, `len(x.shape)`",
    ),
    ZooEntry(
        name="RangeOverShape",
        factory=RangeOverShape,
        inputs={"x": randn(3, 2)},
        extra=({"x": randn(5, 2)},),
        fx_fails=True,
        tricky="`range(x.shape[0])`, returns a list",
    ),
    ZooEntry(
        name="WhileLoop",
        factory=WhileLoop,
        inputs={"x": randn(4) * 3},
        extra=({"x": randn(4) * 40}, {"x": randn(4) / 9}),
        fx_fails=True,
        tricky="`while` on tensor values, returns a Python int",
    ),
    ZooEntry(
        name="IterTensor",
        factory=IterTensor,
        inputs={"x": randn(3, 2)},
        extra=({"x": randn(4, 2)},),
        fx_fails=True,
        tricky="`for row in x`, `enumerate(x)`",
    ),
    ZooEntry(
        name="SumOfList",
        factory=SumOfList,
        inputs={"x": randn(3, 2)},
        extra=({"x": randn(5, 2)},),
        fx_fails=True,
        tricky="`list(tensor)`, `sum()` and `len()` of a list of tensors",
    ),
    ZooEntry(
        name="InplaceIndex",
        factory=InplaceIndex,
        inputs={"x": randn(3, 2)},
        extra=({"x": randn(4, 2)},),
        fx_fails=True,
        tricky="`y[i] = ...` in a loop, in-place write into an input",
    ),
    ZooEntry(
        name="MathOfInts",
        factory=MathOfInts,
        inputs={"x": randn(3, 8)},
        extra=({"x": randn(5, 16)},),
        fx_fails=True,
        tricky="`int(math.log2(x.shape[-1]))`, `math.floor`, `math.sqrt`",
    ),
    ZooEntry(
        name="ShapeFactories",
        factory=ShapeFactories,
        inputs={"x": randn(3, 4)},
        extra=({"x": randn(3, 4)}, {"x": randn(1, 4)}),
        fx_fails=False,
        tricky="`torch.zeros(x.shape)`, `torch.ones(3, 4)`, `torch.arange(x.shape[-1])`",
    ),
    ZooEntry(
        name="RandomFactories",
        factory=RandomFactories,
        inputs={"x": randn(2, 4)},
        extra=({"x": randn(3, 4)},),
        fx_fails=True,
        tricky="`torch.randn(4)` without traced arguments, `rand(x.shape)`, `randn_like`",
        random=True,
    ),
    ZooEntry(
        name="RandnLike",
        factory=RandnLike,
        inputs={"x": randn(2, 4)},
        extra=({"x": randn(3, 4)},),
        fx_fails=False,
        tricky="`torch.randn_like(x)`",
        random=True,
    ),
    ZooEntry(
        name="Dropout(train)",
        factory=lambda: _train(Dropouts()),
        inputs={"x": randn(4, 8)},
        extra=({"x": randn(2, 8)},),
        fx_fails=False,
        tricky="`nn.Dropout` and `F.dropout` in training",
        random=True,
    ),
    ZooEntry(
        name="Dropout(eval)",
        factory=lambda: _eval(Dropouts()),
        inputs={"x": randn(4, 8)},
        extra=({"x": randn(2, 8)},),
        fx_fails=False,
        tricky="`nn.Dropout` and `F.dropout` in evaluation",
    ),
    ZooEntry(
        name="BatchNorm(train)",
        factory=lambda: _train(BatchNorm()),
        inputs={"x": randn(4, 2, 8)},
        extra=({"x": randn(3, 2, 5)},),
        fx_fails=False,
        tricky="batch norm updating its running statistics",
    ),
    ZooEntry(
        name="BatchNorm(eval)",
        factory=lambda: _eval(BatchNorm()),
        inputs={"x": randn(4, 2, 8)},
        extra=({"x": randn(1, 2, 5)},),
        fx_fails=False,
        tricky="batch norm with running statistics",
    ),
    ZooEntry(
        name="BufferUpdate",
        factory=BufferUpdate,
        inputs={"x": randn(3, 4)},
        extra=({"x": randn(5, 4)},),
        fx_fails=True,
        tricky="buffers updated in place by `forward`",
    ),
    ZooEntry(
        name="NestedOutputs",
        factory=NestedOutputs,
        inputs={"x": randn(3, 2)},
        extra=({"x": randn(4, 2)},),
        fx_fails=False,
        tricky="tuple, list, dict, `None`, str and int outputs",
    ),
    ZooEntry(
        name="DataclassOutput",
        factory=DataclassOutput,
        inputs={"x": randn(3, 4)},
        extra=({"x": randn(2, 4)},),
        fx_fails=False,
        tricky="a dataclass output holding tensors and an int",
    ),
    ZooEntry(
        name="NumberOutput",
        factory=NumberOutput,
        inputs={"x": randn(3, 2)},
        extra=({"x": randn(4, 2)},),
        fx_fails=True,
        tricky="`float(x.mean())`, `len(x)`, `.item()` outputs",
    ),
    ZooEntry(
        name="ScalarArgs",
        factory=ScalarArgs,
        inputs={"x": randn(3), "n": 3},
        extra=({"x": randn(3), "n": 5, "scale": 2.0},),
        fx_fails=False,
        tricky="Python `int` and `float` arguments",
    ),
    ZooEntry(
        name="OptionalInput",
        factory=OptionalInput,
        inputs={"x": randn(3)},
        extra=({"x": randn(3), "mask": randn(3)},),
        fx_fails=True,
        tricky="`if mask is not None`, `None` output",
    ),
    ZooEntry(
        name="CustomSubmodules",
        factory=CustomSubmodules,
        inputs={"x": randn(2, 8)},
        extra=({"x": randn(3, 5, 8)},),
        fx_fails=False,
        tricky="custom blocks in a ModuleList, a dict comprehension over a ModuleDict",
    ),
    ZooEntry(
        name="MultiheadAttention",
        factory=lambda: _eval(MultiheadAttention()),
        inputs={"x": randn(2, 5, 16)},
        extra=({"x": randn(1, 3, 16)},),
        fx_fails=False,
        tricky="`nn.MultiheadAttention`, its tuple output unpacked",
    ),
    ZooEntry(
        name="HandAttention",
        factory=HandAttention,
        inputs={"x": randn(2, 5, 16)},
        extra=({"x": randn(1, 7, 16)},),
        fx_fails=False,
        tricky="attention by hand: heads from shapes, a causal mask of traced size",
    ),
    ZooEntry(
        name="LSTM",
        factory=LSTM,
        inputs={"x": randn(2, 5, 4)},
        extra=({"x": randn(3, 2, 4)},),
        fx_fails=False,
        tricky="`nn.LSTM`, nested tuple output unpacked",
    ),
    ZooEntry(
        name="GRU",
        factory=GRU,
        inputs={"x": randn(5, 2, 4)},
        extra=({"x": randn(3, 2, 4), "h0": randn(1, 2, 8)},),
        fx_fails=False,
        tricky="`nn.GRU` with an optional initial state",
    ),
    ZooEntry(
        name="ConvTranspose1d",
        factory=ConvTranspose,
        inputs={"x": randn(1, 2, 5)},
        extra=({"x": randn(2, 2, 9)},),
        fx_fails=False,
        tricky="`output_padding`, and `output_size` computed from a shape",
    ),
    ZooEntry(
        name="WeightNorm",
        factory=WeightNorm,
        inputs={"x": randn(2, 2, 6)},
        extra=({"x": randn(1, 2, 9)},),
        fx_fails=False,
        tricky="`parametrizations.weight_norm` layers",
    ),
    ZooEntry(
        name="SpectralNorm(train)",
        factory=lambda: _train(SpectralNorm()),
        inputs={"x": randn(3, 6)},
        extra=({"x": randn(2, 6)},),
        fx_fails=False,
        tricky="`parametrizations.spectral_norm`, its power iteration updating buffers",
    ),
    ZooEntry(
        name="NormalOutput",
        factory=NormalOutput,
        inputs={"x": randn(3, 4)},
        extra=({"x": randn(5, 4)},),
        fx_fails=True,
        tricky="returns a `torch.distributions.Normal` (which validates its arguments)",
    ),
    ZooEntry(
        name="GPT2Model",
        factory=gpt2,
        inputs={"input_ids": _ids(2, 7)},
        extra=({"input_ids": _ids(1, 12)},),
        fx_fails=True,
        tricky="transformers: decorated `forward(*args, **kwargs)`, `torch.finfo(x.dtype)`, "
        "ModelOutput",
        requires="transformers",
    ),
    ZooEntry(
        name="Wav2Vec2Model",
        factory=wav2vec2,
        inputs={"input_values": randn(2, 400)},
        extra=({"input_values": randn(1, 600)},),
        fx_fails=True,
        tricky="transformers: conv feature extractor, weight-normed positional conv, ModelOutput",
        requires="transformers",
    ),
    ZooEntry(
        name="EncodecModel",
        factory=encodec,
        inputs={"input_values": randn(1, 1, 64)},
        extra=({"input_values": randn(2, 1, 48)},),
        fx_fails=True,
        tricky="transformers: codec with LSTM, residual vector quantizer, padding from shapes",
        requires="transformers",
    ),
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run tests taking a ``zoo_entry`` argument once per entry of the zoo."""
    if "zoo_entry" in metafunc.fixturenames:
        metafunc.parametrize("zoo_entry", ZOO, ids=[e.name for e in ZOO])


def pytest_collection_modifyitems(config, items):
    """Tests marked ``audio`` need the audio extra: without it they are skipped, saying so."""
    import importlib.util

    if all(importlib.util.find_spec(m) for m in ("soundfile", "soxr", "safetensors")):
        return
    skip = pytest.mark.skip(reason="needs the audio extra: pip install 'torchbend[audio]'")
    for item in items:
        if "audio" in item.keywords:
            item.add_marker(skip)


# -- hypothesis profiles (tests/test_properties.py) --------------------------------------------
# "ci" (the default): deterministic examples, no deadline (a first call traces), no example
# database written into the tree, and no shrinking, so that a failure costs no more time than a
# pass (the failing example is printed as generated; it replays with the same profile).
# "long" (HYPOTHESIS_PROFILE=long): 15 times the examples, random, shrunk to a minimal failing
# example: about ten minutes for tests/test_properties.py when everything passes.

try:
    import hypothesis as _hypothesis
except ImportError:  # hypothesis is a dev dependency: the rest of the suite runs without it
    pass
else:
    _hypothesis.settings.register_profile(
        "ci",
        deadline=None,
        derandomize=True,
        database=None,
        phases=(_hypothesis.Phase.explicit, _hypothesis.Phase.reuse, _hypothesis.Phase.generate),
    )
    _hypothesis.settings.register_profile(
        "long", deadline=None, derandomize=False, database=None, print_blob=True
    )
    import os as _os

    _hypothesis.settings.load_profile(_os.environ.get("HYPOTHESIS_PROFILE", "ci"))
