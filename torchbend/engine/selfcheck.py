"""The self-check of traced graphs: a new graph must compute what the module computes.

Each new graph (without its bending slots) and the module's own method run once on the inputs
the graph was traced with, from the same random state and buffers, and their outputs are
compared. A graph that differs is never used: the error names the first module whose output
differs, with the user's source line, instead of a wrong result later.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.fx
from torch import nn

from ..errors import TracingError
from ..tracing import DecisionChanged
from ..tracing.backends import TracingBackend, call_method
from ..tracing.objects import labelled_leaves
from ..tracing.state import kept_attributes, kept_generators
from ..tracing.values import clone_inputs, map_values
from .dispatch import Entry, Method
from .protocols import EntryHooks, Replayable
from .rewriting import build_graph_module, graph_module_record

__all__ = [
    "GraphCheck",
    "RandomState",
    "first_difference",
    "kept_buffers",
    "own_error",
    "untouched",
]

RTOL = 1e-5
"""Relative tolerance of the comparison: graphs may reorder float arithmetic, never change it."""


class RandomState:
    """The states of torch's global generator and of the given generators (or other
    :class:`Replayable` state), to replay a run."""

    def __init__(self, generators: Sequence[Replayable]) -> None:
        self.generators = generators
        self.cpu = torch.random.get_rng_state()
        self.states = [g.get_state() for g in generators]

    def restore(self) -> None:
        """Put every generator back to this state (a run stopped half-way draws again)."""
        torch.random.set_rng_state(self.cpu)
        for g, s in zip(self.generators, self.states):
            g.set_state(s)

    @contextlib.contextmanager
    def replayed(self) -> Iterator[None]:
        """Run a block from this state, then put every generator back where it was."""
        now = RandomState(self.generators)
        self.restore()
        try:
            yield
        finally:
            now.restore()


def own_error(
    root: nn.Module, method: str, inputs: dict[str, Any], generators: Sequence[Replayable]
) -> Exception | None:
    """The error ``root.<method>`` itself raises on ``inputs``, run as the user's code would
    (leaving no trace), or ``None``: when tracing failed, the module's own message, with
    values where the trace's would show proxies."""
    found: Exception | None = None
    with contextlib.suppress(TracingError), untouched(root, RandomState(generators)):
        try:
            call_method(root, method, clone_inputs(inputs))
        except Exception as e:
            found = e
    return found


@contextlib.contextmanager
def untouched(root: nn.Module, state: RandomState) -> Iterator[None]:
    """Run a block from ``state``, then put back ``root``'s plain attributes and buffers and
    every generator: a run made to check or to explain leaves no trace."""
    with kept_attributes(root), kept_buffers(root), kept_generators(root), state.replayed():
        yield


@contextlib.contextmanager
def kept_buffers(root: nn.Module) -> Iterator[None]:
    """Put every buffer of ``root`` back as it was after the block (cached convolutions, batch
    norm statistics), the tensor a module held included where the block replaced it (a cache
    made again at another size): the check runs the model twice and must leave no trace."""
    saved = [
        (m, name, b, b.clone())
        for m in root.modules()
        for name, b in m.named_buffers(recurse=False)
    ]
    try:
        yield
    finally:
        with torch.no_grad():
            for m, name, b, value in saved:
                if getattr(m, name, None) is not b:
                    setattr(m, name, b)
                b.copy_(value)
                if b.grad_fn is not None:  # updated in place from parameters: drop the history
                    b.detach_()


def first_difference(expected: Any, got: Any) -> str | None:
    """What differs between two outputs: nested containers of tensors and plain values, and
    the objects they hold (a ``ModelOutput``'s items, a cache's layers), compared field by
    field."""
    a, b = dict(labelled_leaves(expected)), dict(labelled_leaves(got))
    # An attribute one object has and the other not is a value cached on first use (a
    # distribution's lazy property): compared where both have it.
    if any("." not in w for w in a.keys() ^ b.keys()):
        return (
            f"{len(a)} output value(s) expected ({_where(a)}), the graph gave {len(b)} "
            f"({_where(b)})"
        )
    for w in (w for w in a if w in b):
        x, y, where = a[w], b[w], f"output{w}" if w else "the output"
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return f"{where}: expected {_short(x)}, got {_short(y)}"
        if isinstance(x, torch.Tensor):
            problem = _tensor_difference(x, y)
            if problem:
                return f"{where}: {problem}"
        elif _plain(x) != _plain(y):
            return f"{where}: expected {x!r}, got {y!r}"
    return None


def _where(found: dict[str, Any]) -> str:
    names = [w or "the output" for w in found]
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def buffers_of(root: nn.Module) -> dict[str, torch.Tensor]:
    """Copies of ``root``'s buffers by path, as a call left them."""
    return {path: b.detach().clone() for path, b in root.named_buffers(remove_duplicate=False)}


def _buffer_difference(
    expected: dict[str, torch.Tensor], got: dict[str, torch.Tensor]
) -> str | None:
    """How a graph's call left the module's buffers otherwise than the module's own call: a
    buffer forward replaces or updates that the graph does not (or does otherwise)."""
    for path in expected.keys() | got.keys():
        if path not in got or path not in expected:
            return f"buffer {path!r} is {'missing' if path not in got else 'added'} after the call"
        problem = _tensor_difference(expected[path], got[path])
        if problem is not None:
            return f"buffer {path!r} after the call: {problem}"
    return None


def _plain(value: Any) -> Any:
    return value if isinstance(value, (int, float, bool, str, type(None))) else type(value)


def _short(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    return repr(value)


def _tensor_difference(x: torch.Tensor, y: torch.Tensor) -> str | None:
    if x.shape != y.shape:
        return f"shape {list(y.shape)} instead of {list(x.shape)}"
    if x.dtype != y.dtype:
        return f"dtype {y.dtype} instead of {x.dtype}"
    if x.numel() == 0 or torch.equal(x, y):
        return None
    if not x.is_floating_point() and not x.is_complex():
        return f"{int((x != y).sum())} of {x.numel()} values differ"
    xd, yd = x.detach().double(), y.detach().double()
    both_nan = xd.isnan() & yd.isnan()
    diff = (xd - yd).abs().masked_fill(both_nan, 0.0)
    scale = xd.abs().masked_fill(xd.isnan() | xd.isinf(), 0.0).max().item()
    if bool((diff <= RTOL * (1.0 + scale)).all()):
        return None
    return f"max difference {diff.max().item():.3g} (values up to {scale:.3g})"


class GraphCheck:
    """Check a new graph of ``method``, traced on ``inputs``, against the module itself.

    The graph runs without its bending slots on the module's present buffers and from random
    state ``state`` (that of the trace), and so does the module (``backend.eager``). Raises
    :class:`TracingError` naming the first operation (or module) whose value differs in the
    graph, with the user's source line. When activations were bent while tracing, decisions
    the graph checks on tensor values may rightly differ from the unbent module's: the check
    then gives up there.
    """

    def __init__(
        self,
        backend: TracingBackend,
        hooks: EntryHooks,
        root: nn.Module,
        method: Method,
        entry: Entry,
        inputs: dict[str, Any],
        state: RandomState,
    ) -> None:
        assert entry.gm is not None
        self.backend, self.hooks, self.root, self.state = backend, hooks, root, state
        self.method, self.inputs = method.name, inputs
        self.label = f"{type(root).__name__}.{method.name}"
        self.graph = entry.gm
        self.bent = bool(graph_module_record(entry.gm).slots)
        if self.bent:
            self.graph = build_graph_module(entry.result, root, {}, f"Checked{self.label}")
        self.args = [inputs[n] for n in entry.input_names]

    @contextlib.contextmanager
    def replayed(self) -> Iterator[None]:
        # In the caller's grad mode, as the trace ran: code may branch on it. A backend that
        # does not see Python state change (torch.export restores it) would bake in one value.
        with untouched(self.root, self.state):
            yield

    def eager(self) -> Any:
        with self.replayed():
            return self.backend.eager(self.root, self.method, clone_inputs(self.inputs))

    def run(self) -> None:
        with self.replayed():
            expected = self.backend.eager(self.root, self.method, clone_inputs(self.inputs))
            left = buffers_of(self.root)
        try:
            with self.replayed():
                got = self.graph.forward(*clone_inputs(self.args))
                problem = _buffer_difference(left, buffers_of(self.root))
        except DecisionChanged as e:
            if self.bent:
                return
            step = graph_module_record(self.graph).flow_steps[e.step]
            raise TracingError(
                f"{self.label}: on the inputs it was traced with, the traced graph takes "
                f"decision {step.kind} '{step.name}' at {step.file} otherwise ({e.got!r}) than "
                f"the module ({e.expected!r}). " + _ADVICE
            ) from None
        problem = first_difference(expected, got) or problem
        if problem is not None:
            raise TracingError(
                f"{self.label}: the traced graph does not compute what the module computes on "
                f"the inputs it was traced with ({problem}){self.where_it_differs()}; the graph is "
                "not used. " + _ADVICE
            )

    def where_it_differs(self) -> str:
        """``"; the first operation whose value differs is ..."`` (from the values a second
        trace computes), else ``"; the first module whose output differs is ..."`` (from hooks
        on the module's run), or ``""``."""
        computed: dict[str, Any] = {}
        with contextlib.suppress(Exception), self.replayed():
            _Recorder(self.graph, computed).run(*clone_inputs(self.args))
        values, lines = self.traced_again()
        for node in self.graph.graph.nodes:
            if node.op in ("placeholder", "get_attr", "output") or node.name not in values:
                continue
            if node.name not in computed:
                break
            problem = first_difference(values[node.name], computed[node.name])
            if problem is not None:
                what = f"{node.op} {getattr(node.target, '__name__', node.target)} in the graph"
                where = f", called at {lines[node.name]}" if lines.get(node.name) else ""
                problem = problem.replace("the output", "its value")
                return (
                    f"; the first operation whose value differs is '{node.name}' ({what})"
                    f"{where}: {problem}"
                )
        return self.first_module(computed, lines)

    def first_module(self, computed: dict[str, Any], lines: dict[str, str]) -> str:
        """``"; the first module whose output differs is ..."``, or ``""``."""
        seen: dict[str, list[Any]] = {}

        def keep(name: str) -> Callable[..., None]:
            def hook(_module: nn.Module, _inputs: Any, out: Any) -> None:
                copy = map_values(out, lambda v: v.clone() if isinstance(v, torch.Tensor) else v)
                seen.setdefault(name, []).append(copy)

            return hook

        handles = [m.register_forward_hook(keep(name)) for name, m in self.root.named_modules()]
        try:
            self.eager()
        finally:
            for h in handles:
                h.remove()
        paths = graph_module_record(self.graph).paths
        calls: dict[str, int] = {}
        for node in self.graph.graph.nodes:
            if node.op != "call_module":
                continue
            path = paths.get(str(node.target), str(node.target))
            k = calls[path] = calls.get(path, -1) + 1
            if node.name not in computed:
                return f"; the graph stopped before module '{path}'"
            if k >= len(seen.get(path, [])):
                return f"; the graph calls module '{path}' where the module does not"
            problem = first_difference(seen[path][k], computed[node.name])
            if problem is not None:
                where = f", called at {lines[node.name]}" if lines.get(node.name) else ""
                problem = problem.replace("the output", "its output")
                return f"; the first module whose output differs is '{path}'{where}: {problem}"
        return ""

    def traced_again(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The value of each node on the inputs, and the line of the user's code it comes
        from: traced again (backends that follow values concretely give them)."""
        values: dict[str, Any] = {}
        lines: dict[str, str] = {}

        def on_value(node: torch.fx.Node, value: Any) -> Any:
            lines[node.name] = _caller_line()
            value = self.hooks.bend_value(self.method, node, value)
            values[node.name] = map_values(
                value, lambda v: v.clone() if isinstance(v, torch.Tensor) else v
            )
            return value

        with contextlib.suppress(Exception), self.state.replayed():
            self.backend.trace(self.root, self.method, self.inputs, on_value)
        return values, lines


_ADVICE = (
    "The tracer followed some Python differently from Python itself (please report it with "
    "the module). To use the graph anyway, at your own risk, pass check=False to BendedModule."
)


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, into: dict[str, Any]) -> None:
        super().__init__(gm)
        self.into = into

    def run_node(self, n: torch.fx.Node) -> Any:
        value = super().run_node(n)
        self.into[n.name] = value
        return value


_SKIP = (os.path.dirname(os.path.dirname(__file__)), os.path.dirname(torch.__file__))


def _caller_line() -> str:
    """The innermost frame of the running stack in the user's code (not torch's or ours)."""
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(_SKIP):
            where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
            return f"{where} ({frame.name}: {(frame.line or '').strip()})"
    return ""
