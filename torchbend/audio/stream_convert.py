"""make_streaming: a graph pass that makes a model without state stream block by block."""

from __future__ import annotations

import operator

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from ..errors import AudioError
from .stateful import (
    DelayLine,
    StatefulGRU,
    StatefulLSTM,
    StreamingConv1d,
    StreamingConvTranspose1d,
)
from .stream_nodes import (
    declared_latency,
    dim_argument,
    flat_args,
    input_channels,
    is_conv,
    node_delay,
    node_place,
    node_rank,
    node_shape,
    target_name,
    zero_pad,
)

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


_STATEFUL = (StreamingConv1d, StreamingConvTranspose1d, DelayLine, StatefulGRU, StatefulLSTM)
"""The layers the pass puts in, each with a ``reset_cache()``."""


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
            if isinstance(module, _STATEFUL):
                module.reset_cache()


def make_streaming(module: nn.Module, example: torch.Tensor | None = None) -> StreamingModule:
    """Convert ``module`` (a model that keeps no state between calls) into one that streams.

    The module is traced with ``torch.fx`` and each layer that looks at past or future frames
    gets the state it needs: a padded ``Conv1d`` (``padding=p``, or an ``F.pad`` before it)
    runs on its past input instead of zeros, which delays its output by its right padding
    (``p`` frames for centred padding, none for a causal one); a ``ConvTranspose1d`` that
    upsamples by its stride exactly keeps the tail of its output that overlaps the next
    block (its ``padding`` is a delay, and the delay before it is multiplied by its stride);
    ``nn.GRU`` and ``nn.LSTM`` called without a state carry theirs from block to block.
    Where branches of different delays merge (a residual add, a cat), the less delayed ones
    go through a delay line, so the output is the original's delayed by
    :attr:`StreamingModule.latency` in all (in output samples).

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
        AudioError: a layer the pass cannot make stream (a strided convolution, a transposed
            one that does not upsample exactly, a pooling, a bidirectional recurrent layer, an
            op along the time axis), naming it and the reason; or a module ``torch.fx`` cannot
            trace.

    Example:
        >>> model = nn.Sequential(nn.Conv1d(1, 4, 3, padding=1), nn.Tanh(), nn.Conv1d(4, 1, 1))
        >>> streaming = make_streaming(model)
        >>> streaming.latency
        1
    """
    if not isinstance(module, nn.Module) or isinstance(module, torch.jit.ScriptModule):
        raise AudioError(f"make_streaming converts a torch.nn.Module, got {type(module).__name__}")
    if type(module).__module__.startswith("torch.nn.modules"):
        module = nn.Sequential(module)  # a bare layer: traced as a layer, not into its code
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
        example = torch.randn(1, input_channels(module, graph), EXAMPLE_LENGTH)
    with torch.no_grad():
        ShapeProp(graph).propagate(example)
    layers: list[str] = []
    latency = _Pass(graph, layers).run()
    streaming = StreamingModule(graph, latency + declared_latency(module), layers)
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
                raise AudioError(f"make_streaming: {node_place(node)}: {e}") from None
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
        elif isinstance(layer, nn.ConvTranspose1d):
            node.meta["tb_delay"] = self.transposed(node, layer, source)
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
            isinstance(layer, (nn.Linear, nn.LayerNorm)) and time != node_rank(node) - 1
        ):
            node.meta["tb_delay"], node.meta["tb_time"] = delay, time
        elif isinstance(layer, nn.BatchNorm1d) and time == 2:
            node.meta["tb_delay"], node.meta["tb_time"] = delay, time
        else:
            raise AudioError(
                f"no streaming form of {type(layer).__name__} (the pass converts stride-1 "
                "Conv1d, ConvTranspose1d, GRU, LSTM and layers that work frame by frame)"
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
        pad = zero_pad(source)
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

    def transposed(
        self, node: torch.fx.Node, conv: nn.ConvTranspose1d, source: torch.fx.Node
    ) -> int:
        stride, kernel = conv.stride[0], conv.kernel_size[0]
        padding = int(conv.padding[0])  # a transposed convolution's padding is a number
        if conv.dilation[0] != 1 or conv.padding_mode != "zeros":
            raise AudioError("dilation 1 and zero padding only")
        if source.meta.get("tb_time") != 2:
            raise AudioError("its input's time axis is not the last")
        if kernel - 2 * padding + conv.output_padding[0] != stride:
            raise AudioError(
                f"gives {kernel - 2 * padding + conv.output_padding[0] - stride} frames more "
                f"than time * stride ({stride}); the pass converts layers that upsample exactly"
            )
        delay = int(source.meta["tb_delay"])
        self.gm.add_submodule(str(node.target), StreamingConvTranspose1d(conv, delay))
        self.layers.append(
            f"{node.target}: ConvTranspose1d keeps {max(kernel - stride, 0)} frames of overlap, "
            f"delay {padding}"
        )
        return delay * stride + padding

    def function(self, node: torch.fx.Node) -> None:
        target = node.target
        if target in _TIME_MIXING or target is torch.nn.functional.pad:
            if target is F.pad and zero_pad(node) is not None:
                users = list(node.users)
                if len(users) == 1 and is_conv(self.gm, users[0]):
                    source = node.args[0]
                    assert isinstance(source, torch.fx.Node)
                    node.meta["tb_delay"] = source.meta.get("tb_delay")
                    node.meta["tb_time"] = source.meta.get("tb_time")
                    return  # folded into the convolution
            raise AudioError(f"{target_name(target)} mixes frames; no streaming form of it here")
        tensors = [a for a in flat_args(node.args, node.kwargs) if node_delay(a) is not None]
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
        name = target_name(node.target)
        rank = node_rank(first)
        if name in ("transpose", "swapaxes"):
            a, b = (int(d) % rank for d in node.args[1:3])  # type: ignore[arg-type]
            return b if time == a else a if time == b else time
        if name == "permute":
            dims = node.args[1:] if not isinstance(node.args[1], (list, tuple)) else node.args[1]
            return [int(d) % rank for d in dims].index(time)  # type: ignore[arg-type]
        dim = node.kwargs.get("dim", dim_argument(node))
        if isinstance(dim, int) and dim % max(rank, 1) == time:
            raise AudioError(f"{name} works along the time axis; no streaming form of it here")
        meta = node.meta.get("tensor_meta")
        if (
            isinstance(meta, TensorMetadata)
            and node_shape(first)
            and (len(meta.shape) != rank or meta.shape[time] != node_shape(first)[time])
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
