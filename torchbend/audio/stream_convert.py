"""make_streaming: a graph pass that makes a model without state stream block by block."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from ..errors import AudioError
from .stateful import DelayLine, StatefulGRU, StatefulLSTM, StreamingConv1d

__all__ = ["StreamingModule", "make_streaming"]

EXAMPLE_LENGTH = 263
"""Frames of the example input the pass runs the model on (an odd length, which no channel
count of a test model is likely to equal, so that the time axis is told apart by its size)."""

_POINTWISE_MODULES: tuple[type[nn.Module], ...] = (
    nn.Identity,
    nn.Dropout,
    nn.ReLU,
    nn.LeakyReLU,
    nn.PReLU,
    nn.ELU,
    nn.SELU,
    nn.GELU,
    nn.SiLU,
    nn.Mish,
    nn.Tanh,
    nn.Sigmoid,
    nn.Hardtanh,
    nn.Softsign,
    nn.Softplus,
)
"""Modules that compute each frame from the same frame only, whatever the axis of time."""

_TIME_MIXING = {F.interpolate, F.avg_pool1d, F.max_pool1d, F.conv1d, F.conv_transpose1d}
"""Functions whose output frames mix input frames: the pass refuses them."""


class StreamingModule(nn.Module):
    """A model converted by :func:`make_streaming`: its graph, with convolutions that keep
    their past input, recurrent layers that keep their state and delay lines where branches
    of different delays merge.

    Its output, block by block from a :meth:`reset_cache`, is the original model's output on
    the whole signal delayed by :attr:`latency` samples.
    """

    def __init__(self, graph: torch.fx.GraphModule, latency: int, layers: list[str]) -> None:
        super().__init__()
        self.graph = graph
        self.latency = latency
        """Frames the output is delayed by against the original model's (samples for audio)."""
        self.converted = layers
        """What the pass did, a line per layer: its name, what it became, its delay."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.graph(x)

    def reset_cache(self) -> None:
        """Forget the past: the next block starts from silence, as the original model does."""
        for module in self.graph.modules():
            if isinstance(module, (StreamingConv1d, DelayLine, StatefulGRU, StatefulLSTM)):
                module.reset_cache()


def make_streaming(module: nn.Module, example: torch.Tensor | None = None) -> StreamingModule:
    """Convert ``module`` (a model that keeps no state between calls) into one that streams.

    The module is traced with ``torch.fx`` and each layer that looks at past or future frames
    gets the state it needs: a padded ``Conv1d`` (``padding=p``, or an ``F.pad`` before it)
    runs on its past input instead of zeros, which delays its output by its right padding
    (``p`` frames for centred padding, none for a causal one); ``nn.GRU`` and ``nn.LSTM``
    called without a state carry theirs from block to block. Where branches of different
    delays merge (a residual add, a cat), the less delayed ones go through a delay line, so the
    output is the original's delayed by :attr:`StreamingModule.latency` in all.

    Args:
        module: a model ``[batch, channels, time] -> [batch, channels, time]`` in one
            ``forward(x)``, traceable by ``torch.fx``.
        example: an input to trace shapes on (default: noise of the module's ``channels``,
            ``n_channels`` or ``in_channels`` attribute, else its first convolution's input
            channels, and 263 frames).

    Returns:
        A :class:`StreamingModule`, with ``reset_cache()`` and ``latency`` (which
        :class:`~torchbend.audio.Stream` and the nn~ export read); the module's weights are
        shared with it, not copied. The ``channels``, ``sample_rate`` and ``ratio`` attributes
        of ``module`` are carried over.

    Raises:
        AudioError: a layer the pass cannot make stream (a strided or transposed convolution,
            a pooling, a bidirectional recurrent layer, an op that mixes frames), naming it
            and the reason; or a module ``torch.fx`` cannot trace.

    Example:
        >>> model = nn.Sequential(nn.Conv1d(1, 4, 3, padding=1), nn.Tanh(), nn.Conv1d(4, 1, 1))
        >>> streaming = make_streaming(model)
        >>> streaming.latency
        1
    """
    if not isinstance(module, nn.Module) or isinstance(module, torch.jit.ScriptModule):
        raise AudioError(f"make_streaming converts a torch.nn.Module, got {type(module).__name__}")
    try:
        graph = torch.fx.symbolic_trace(module)
    except Exception as e:
        raise AudioError(
            f"make_streaming traces {type(module).__name__} with torch.fx, which failed: "
            f"{type(e).__name__}: {e}"
        ) from e
    inputs = [n for n in graph.graph.nodes if n.op == "placeholder"]
    if len(inputs) != 1:
        raise AudioError(
            f"make_streaming converts a forward of one input, {type(module).__name__}.forward "
            f"takes {[n.target for n in inputs]}"
        )
    if example is None:
        example = torch.randn(1, _channels(module, graph), EXAMPLE_LENGTH)
    with torch.no_grad():
        ShapeProp(graph).propagate(example)
    layers: list[str] = []
    latency = _Pass(graph, layers).run()
    streaming = StreamingModule(graph, latency + _declared_latency(module), layers)
    for name in ("channels", "n_channels", "in_channels", "sample_rate", "ratio"):
        value = getattr(module, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(streaming, name, value)
    return streaming


class _Pass:
    """Delays (``node.meta["tb_delay"]``) and time axes (``node.meta["tb_time"]``) of a
    graph's tensors, layer by layer, with the stateful layers put in."""

    def __init__(self, graph: torch.fx.GraphModule, layers: list[str]) -> None:
        self.gm = graph
        self.layers = layers
        self.lines = 0

    def run(self) -> int:
        for node in list(self.gm.graph.nodes):
            try:
                self.visit(node)
            except AudioError as e:
                raise AudioError(f"make_streaming: {_where(node)}: {e}") from None
        self.gm.graph.eliminate_dead_code()
        self.gm.recompile()
        output = next(n for n in self.gm.graph.nodes if n.op == "output")
        result = output.args[0]
        if not isinstance(result, torch.fx.Node) or result.meta.get("tb_delay") is None:
            raise AudioError("make_streaming converts a forward returning one tensor")
        return int(result.meta["tb_delay"])

    def visit(self, node: torch.fx.Node) -> None:
        node.meta["tb_delay"], node.meta["tb_time"] = None, None
        if node.op == "placeholder":
            node.meta["tb_delay"], node.meta["tb_time"] = 0, 2
        elif node.op == "call_module":
            self.module(node, self.gm.get_submodule(str(node.target)))
        elif node.op in ("call_function", "call_method"):
            self.function(node)

    def module(self, node: torch.fx.Node, layer: nn.Module) -> None:
        source = node.args[0] if node.args else None
        if not isinstance(source, torch.fx.Node) or len(node.args) != 1 or node.kwargs:
            raise AudioError(f"{type(layer).__name__} called with other arguments than a tensor")
        delay, time = source.meta.get("tb_delay"), source.meta.get("tb_time")
        if delay is None:
            return
        if isinstance(layer, nn.Conv1d):
            node.meta["tb_delay"] = self.conv(node, layer, source)
            node.meta["tb_time"] = 2
        elif isinstance(layer, (nn.GRU, nn.LSTM)):
            if layer.bidirectional:
                raise AudioError("a bidirectional recurrent layer reads the future: no stream")
            if time != (1 if layer.batch_first else 0):
                raise AudioError(f"its input's time axis is {time}, not its sequence axis")
            kind = StatefulGRU if isinstance(layer, nn.GRU) else StatefulLSTM
            stateful = kind(layer, delay)  # type: ignore[arg-type]
            self.gm.add_submodule(str(node.target), stateful)
            self.layers.append(f"{node.target}: {type(layer).__name__} keeps its state")
            node.meta["tb_delay"], node.meta["tb_time"] = delay, time
            node.meta["tb_tuple"] = True
        elif isinstance(layer, _POINTWISE_MODULES) or (
            isinstance(layer, (nn.Linear, nn.LayerNorm)) and time != _rank(node) - 1
        ):
            node.meta["tb_delay"], node.meta["tb_time"] = delay, time
        elif isinstance(layer, nn.BatchNorm1d) and time == 2:
            node.meta["tb_delay"], node.meta["tb_time"] = delay, time
        else:
            raise AudioError(
                f"no streaming form of {type(layer).__name__} (the pass converts stride-1 "
                "Conv1d, GRU, LSTM and layers that work frame by frame)"
            )

    def conv(self, node: torch.fx.Node, conv: nn.Conv1d, source: torch.fx.Node) -> int:
        if conv.stride[0] != 1:
            raise AudioError(f"stride {conv.stride[0]}: the pass converts stride 1 only")
        if conv.padding_mode != "zeros":
            raise AudioError(f"padding_mode {conv.padding_mode!r}: zeros only")
        if source.meta.get("tb_time") != 2:
            raise AudioError("its input's time axis is not the last")
        span = (conv.kernel_size[0] - 1) * conv.dilation[0]
        if isinstance(conv.padding, str):
            left, right = (span // 2, span - span // 2) if conv.padding == "same" else (0, 0)
        else:
            left = right = conv.padding[0]
        pad = _zero_pad(source)
        if pad is not None and len(source.users) == 1:
            padded, (extra_left, extra_right) = pad
            left, right = left + extra_left, right + extra_right
            node.args = (padded,)
            source = padded
        if left + right != span or left > span:
            raise AudioError(
                f"padded by {left} on the left and {right} on the right, the pass converts "
                f"convolutions that keep the length (padded by {span} in all)"
            )
        if span:
            skip = int(source.meta["tb_delay"])
            self.gm.add_submodule(str(node.target), StreamingConv1d(conv, skip))
            self.layers.append(f"{node.target}: Conv1d keeps {span} frames, delay {right}")
        return int(source.meta["tb_delay"]) + right

    def function(self, node: torch.fx.Node) -> None:
        target = node.target
        if target in _TIME_MIXING or target is torch.nn.functional.pad:
            if target is F.pad and _zero_pad(node) is not None:
                users = list(node.users)
                if len(users) == 1 and _is_conv(self.gm, users[0]):
                    source = node.args[0]
                    assert isinstance(source, torch.fx.Node)
                    node.meta["tb_delay"] = source.meta.get("tb_delay")
                    node.meta["tb_time"] = source.meta.get("tb_time")
                    return  # folded into the convolution
            raise AudioError(f"{_name(target)} mixes frames; no streaming form of it here")
        tensors = [a for a in _flat(node.args, node.kwargs) if _delay(a) is not None]
        if not tensors:
            return
        first = tensors[0]
        time = first.meta["tb_time"]
        if target is operator.getitem and first.meta.get("tb_tuple"):
            index = node.args[1]
            if index == 0:
                node.meta["tb_delay"], node.meta["tb_time"] = first.meta["tb_delay"], time
            return  # the state a recurrent layer returns has no time axis
        time = self.axis(node, first, time)
        delays = {int(a.meta["tb_delay"]) for a in tensors}
        if len(delays) > 1:
            if any(a.meta["tb_time"] != time for a in tensors):
                raise AudioError("merges tensors whose time axes differ")
            latest = max(delays)
            for source in tensors:
                if source.meta["tb_delay"] < latest:
                    self.delay(node, source, latest - int(source.meta["tb_delay"]), time)
        node.meta["tb_delay"], node.meta["tb_time"] = max(delays), time

    def axis(self, node: torch.fx.Node, first: torch.fx.Node, time: int) -> int:
        """The time axis of ``node``'s output; refuses an op that works along it."""
        name = _name(node.target)
        rank = _rank(first)
        if name in ("transpose", "swapaxes"):
            a, b = (int(d) % rank for d in node.args[1:3])  # type: ignore[arg-type]
            return b if time == a else a if time == b else time
        if name == "permute":
            dims = node.args[1:] if not isinstance(node.args[1], (list, tuple)) else node.args[1]
            return [int(d) % rank for d in dims].index(time)  # type: ignore[arg-type]
        dim = node.kwargs.get("dim", _dim_argument(node))
        if isinstance(dim, int) and dim % max(rank, 1) == time:
            raise AudioError(f"{name} works along the time axis; no streaming form of it here")
        meta = node.meta.get("tensor_meta")
        if (
            isinstance(meta, TensorMetadata)
            and _shape(first)
            and (len(meta.shape) != rank or meta.shape[time] != _shape(first)[time])
        ):
            raise AudioError(f"{name} changes the time axis; no streaming form of it here")
        if name == "getitem" and isinstance(node.args[1], tuple):
            index = node.args[1]
            if len(index) > time and index[time] != slice(None):
                raise AudioError("indexes the time axis; no streaming form of it here")
        return time

    def delay(self, node: torch.fx.Node, source: torch.fx.Node, frames: int, time: int) -> None:
        name = f"tb_delay_{self.lines}"
        self.lines += 1
        self.gm.add_submodule(name, DelayLine(frames, time))
        with self.gm.graph.inserting_before(node):
            delayed = self.gm.graph.call_module(name, (source,))
        delayed.meta.update(source.meta)
        node.replace_input_with(source, delayed)
        self.layers.append(f"{name}: delays {source.name} by {frames} before {node.name}")


def _flat(args: Any, kwargs: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for value in [*args, *kwargs.values()]:
        out.extend(_flat(value, {}) if isinstance(value, (list, tuple)) else [value])
    return out


def _delay(value: Any) -> int | None:
    return value.meta.get("tb_delay") if isinstance(value, torch.fx.Node) else None


def _shape(node: torch.fx.Node) -> tuple[int, ...]:
    meta = node.meta.get("tensor_meta")
    return tuple(meta.shape) if isinstance(meta, TensorMetadata) else ()


def _rank(node: torch.fx.Node) -> int:
    return len(_shape(node)) or 3


def _dim_argument(node: torch.fx.Node) -> Any:
    """The positional ``dim`` of the reductions and splits that take one second."""
    name = _name(node.target)
    methods = {"sum", "mean", "cumsum", "softmax", "flip", "roll", "chunk", "split", "narrow"}
    position = 2 if name in ("chunk", "split", "roll") else 1
    if name not in methods:
        return None
    if len(node.args) > position:
        return node.args[position]
    return 0 if name in ("chunk", "split") else None


def _zero_pad(node: torch.fx.Node) -> tuple[torch.fx.Node, tuple[int, int]] | None:
    """``(input, (left, right))`` if ``node`` pads the last axis only, with zeros."""
    if node.op != "call_function" or node.target is not F.pad:
        return None
    source, pad = node.args[0], node.args[1] if len(node.args) > 1 else node.kwargs.get("pad")
    mode = node.args[2] if len(node.args) > 2 else node.kwargs.get("mode", "constant")
    value = node.args[3] if len(node.args) > 3 else node.kwargs.get("value", None)
    if (
        not isinstance(source, torch.fx.Node)
        or not isinstance(pad, (list, tuple))
        or len(pad) != 2
        or not all(isinstance(p, int) and p >= 0 for p in pad)
        or mode != "constant"
        or value not in (None, 0, 0.0)
    ):
        return None
    return source, (int(pad[0]), int(pad[1]))  # type: ignore[arg-type]


def _is_conv(graph: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    return node.op == "call_module" and isinstance(graph.get_submodule(str(node.target)), nn.Conv1d)


def _name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def _where(node: torch.fx.Node) -> str:
    if node.op == "call_module":
        return f"layer {node.target!r}"
    return f"{_name(node.target)} ({node.name})"


def _channels(module: nn.Module, graph: torch.fx.GraphModule) -> int:
    for name in ("channels", "n_channels", "in_channels"):
        value = getattr(module, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    for node in graph.graph.nodes:
        if node.op == "call_module" and isinstance(
            graph.get_submodule(str(node.target)), nn.Conv1d
        ):
            conv = graph.get_submodule(str(node.target))
            assert isinstance(conv, nn.Conv1d)
            return conv.in_channels
    return 1


def _declared_latency(module: nn.Module) -> int:
    value = getattr(module, "latency", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
