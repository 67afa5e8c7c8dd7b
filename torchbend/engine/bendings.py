"""The bending set: the bendings applied to a module, their targets and activation slots."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch import nn

from ..callbacks.base import BendingCallback
from ..callbacks.capture import Capture
from ..config import BendingConfig, ConfigItem
from ..errors import BendingError
from ..tracing import record_of
from ..tracing.surgery import decisions_only
from .dispatch import Entry, Method
from .folding import can_fold, fold_slots
from .protocols import Replayable
from .rewriting import ActivationSlot, build_graph_module
from .selection import Selection, matches
from .shaping import Shaped

__all__ = ["Bending", "BendingSet", "time_rate"]


@dataclass
class Bending:
    """One call of :meth:`BendedModule.bend`: a callback and the targets it bends."""

    callback: BendingCallback
    patterns: tuple[str, ...]
    fn: str | tuple[str, ...] | None
    weights: list[str]
    activations: dict[str, list[str]]
    registered: set[str] = field(default_factory=set)
    expanded: tuple[str, ...] = ()
    """The patterns with their aliases (``#name``) replaced by what they stand for."""
    options: dict[str, Any] = field(default_factory=dict)
    """The options ``bend`` was given (see :func:`~torchbend.engine.shaping.options`);
    ``callback`` applies the given callback with them."""
    given: BendingCallback | None = None
    """The callback ``bend`` was given, when ``callback`` applies it with options."""

    def keys(self) -> list[str]:
        """Weight names, then activations as ``"<method>:<node>"``."""
        return self.weights + [f"{m}:{n}" for m, ns in self.activations.items() for n in ns]

    def applies(self, method: str, node: str) -> bool:
        """Whether this bending's patterns select activation ``node`` of ``method``."""
        fns = None if self.fn is None else {self.fn} if isinstance(self.fn, str) else set(self.fn)
        return matches(self.expanded or self.patterns, method, node, fns)


def time_rate(entry: Entry, node: torch.fx.Node, sample_rate: float | None) -> float | None:
    """The sample rate of activation ``node`` along its last (time) axis: ``sample_rate``
    times its length over the length of the graph's audio, taken as the longest last axis of
    its first tensor input and of its output (the input of an encoder, the output of a
    decoder); ``None`` if the rate or the lengths are not known."""
    shape = record_of(node).shape
    if sample_rate is None or not isinstance(shape, torch.Size) or not shape:
        return None
    ends: list[torch.fx.Node] = [n for n in entry.graph.nodes if n.op == "placeholder"][:1]
    output = next((n for n in entry.graph.nodes if n.op == "output"), None)
    if output is not None:
        found: list[torch.fx.Node] = []
        torch.fx.node.map_arg(output.args, found.append)
        ends += found[:1]
    lengths = [
        end_shape[-1]
        for end in ends
        if isinstance(end_shape := record_of(end).shape, torch.Size) and len(end_shape) > 0
    ]
    if not lengths or max(lengths) == 0:
        return None
    return float(sample_rate) * shape[-1] / max(lengths)


class BendingSet:
    """The bendings applied to one module, in order.

    It owns the callbacks (``callbacks``, a ``ModuleList`` the facade registers so that their
    state follows ``.to()`` and ``state_dict``), matches bendings on traced graphs, bends
    concrete values while tracing, and compiles each graph with a slot after every bent
    activation. It implements what the method table needs of it
    (:class:`~torchbend.engine.protocols.EntryHooks`) and what the weight bank does
    (:class:`~torchbend.engine.weights.WeightBender`).

    Args:
        owner: name of the wrapped module's class, for generated class names.
        sample_rate: gives the wrapped model's sample rate, if known (for windows in seconds).
    """

    def __init__(self, owner: str, sample_rate: Callable[[], float | None]) -> None:
        self.owner = owner
        self.sample_rate = sample_rate
        """The wrapped model's sample rate, if known (for windows in seconds)."""
        self.callbacks = nn.ModuleList()
        self._bendings: list[Bending] = []
        self.generation = 0
        """Counts changes of the set, for caches that depend on it."""

    def __iter__(self) -> Iterator[Bending]:
        return iter(list(self._bendings))

    def __len__(self) -> int:
        return len(self._bendings)

    def add(
        self,
        callback: BendingCallback,
        patterns: Sequence[str],
        fn: str | tuple[str, ...] | None,
        selection: Selection,
        weights: Mapping[str, torch.Tensor],
        expanded: Sequence[str] = (),
        options: dict[str, Any] | None = None,
        given: BendingCallback | None = None,
    ) -> Bending:
        """Add a bending of the selected targets; ``weights`` are the originals it bends,
        ``expanded`` its patterns with aliases replaced."""
        bending = Bending(
            callback,
            tuple(patterns),
            fn,
            selection.weights,
            selection.activations,
            expanded=tuple(expanded),
            options=dict(options or {}),
            given=given if given is not callback else None,
        )
        try:
            for name in bending.weights:
                w = weights[name]
                callback.register(name, w.shape, w.dtype, w.device)
                bending.registered.add(name)
        except BaseException:
            self._forget(bending)
            raise
        self._bendings.append(bending)
        self.generation += 1
        if not any(cb is callback for cb in self.callbacks):
            self.callbacks.append(callback)
        return bending

    def warnings_for(
        self,
        bending: Bending,
        entries: Iterable[tuple[Method, Entry]],
        flips: Callable[[Method, Entry], bool],
    ) -> None:
        """Warn about a new ``bending`` that does not do what it seems to: one stacked on the
        same bending of the same targets (a notebook cell run twice), or one of activations
        that only decisions read in every graph that has them, where the bent value takes the
        decisions taken when traced (``flips(method, entry)``: whether it takes others on
        the inputs ``entry`` was traced with): it changes nothing on those inputs."""
        cb = bending.callback
        for other in self._bendings:
            if other is bending or type(other.callback) is not type(cb):
                continue
            if other.callback is cb or repr(other.callback) == repr(cb):
                shared = [k for k in bending.keys() if k in other.keys()]
                if shared:
                    warnings.warn(
                        f"{cb!r} already bends {_few(shared)}: this bending stacks a second one "
                        "on top. Call bended.reset() first to replace a bending.",
                        stacklevel=3,
                    )
                    break
        # Per target: where decisions read it, or None once a graph reads it otherwise (or
        # the bent value flips a decision there: the other branch runs, the output changes).
        unread: dict[str, list[str] | None] = {}
        lacking: dict[str, int] = {}  # graphs of other decisions that do not have it
        for method, entry in entries:
            for name in bending.activations.get(method.key, []):
                key = f"{method.key}:{name}"
                if unread.get(key, []) is None:
                    continue
                if all(n.name != name for n in entry.graph.nodes):
                    lacking[key] = lacking.get(key, 0) + 1
                    continue
                guards = decisions_only(entry.graph, name)
                if not guards or flips(method, entry):
                    unread[key] = None
                    continue
                steps = [entry.result.flow_steps[int(str(g.args[3]))] for g in guards]
                where = unread.setdefault(key, [])
                assert where is not None
                where.extend(f"{s.kind} at {s.file} ({s.function})" for s in steps)
        for key, where in unread.items():
            if where:
                others = lacking.get(key, 0)
                warnings.warn(
                    f"bending {key} changes nothing on the inputs traced: only decisions read "
                    f"it ({', '.join(dict.fromkeys(where))}) and the bent value takes the "
                    "decisions taken when traced"
                    + (f"; {others} graph(s) traced for other inputs lack it" if others else "")
                    + ". It changes the output only for inputs where it flips a decision (the "
                    "other branch then runs); to change it directly, bend the activations it "
                    "is computed from, or those the decision selects.",
                    stacklevel=3,
                )

    def remove(self, bending: Bending) -> None:
        """Take ``bending`` out (a bend() that failed half-way)."""
        self._bendings = [b for b in self._bendings if b is not bending]
        self._forget(bending)
        if all(b.callback is not bending.callback for b in self._bendings):
            kept = [cb for cb in self.callbacks if cb is not bending.callback]
            del self.callbacks[:]
            self.callbacks.extend(kept)
        self.generation += 1

    def _forget(self, bending: Bending) -> None:
        """Unregister the targets only ``bending`` gave its callback: a callback taken out
        keeps no state for them, and a control it follows derives none."""
        for key in bending.registered:
            if not any(
                b is not bending and b.callback is bending.callback and key in b.registered
                for b in self._bendings
            ):
                bending.callback.unregister(key)

    def clear(self) -> None:
        self._bendings.clear()
        del self.callbacks[:]
        self.generation += 1

    def keys(self) -> list[str]:
        """Every bent target: weight names, then ``"<method>:<node>"`` activations."""
        return list(dict.fromkeys(k for b in self._bendings for k in b.keys()))

    def weights(self) -> list[str]:
        """The bent weights, in the order they were bent."""
        return list(dict.fromkeys(w for b in self._bendings for w in b.weights))

    def config(self) -> BendingConfig:
        """The bendings as a :class:`BendingConfig`."""
        return BendingConfig(
            *[
                ConfigItem(b.given or b.callback, b.patterns, b.fn, b.keys(), dict(b.options))
                for b in self._bendings
            ]
        )

    def bend_weight(self, name: str, weight: torch.Tensor) -> torch.Tensor:
        """``weight`` bent by every bending of weight ``name``, in order."""
        for b in self._bendings:
            if name in b.weights:
                weight = b.callback.bend_weight(weight, name)
        return weight

    def capture(self) -> Callable[[], None]:
        """Start every :class:`~torchbend.Capture` among the callbacks; returns what stops them."""
        captures = [cb for cb in self.callbacks.modules() if isinstance(cb, Capture)]
        if not captures:
            raise BendingError("no Capture is bent into this model: bend tb.Capture() first")
        for cb in captures:
            cb.capture()

        def stop() -> None:
            for cb in captures:
                cb.stop()

        return stop

    # -- graphs ----------------------------------------------------------------------------------

    def _register(self, bending: Bending, method: str, node: str, value: Any) -> None:
        key = f"{method}:{node}"
        if key not in bending.registered:
            shape, dtype, device = value
            bending.callback.register(key, shape, dtype, device)
            bending.registered.add(key)
        matched = bending.activations.setdefault(method, [])
        if node not in matched:
            matched.append(node)

    def attach_one(self, bending: Bending, method: Method, entry: Entry) -> None:
        """Match ``bending``'s patterns on a graph traced before or after it."""
        for node in entry.nodes(tensors_only=True):
            if bending.applies(method.key, node.name):
                record = record_of(node)
                meta = (record.shape, record.dtype, record.device)
                shaped = bending.callback
                if isinstance(shaped, Shaped) and shaped.window_unit == "seconds":
                    rate = time_rate(entry, node, self.sample_rate())
                    shaped.place(f"{method.key}:{node.name}", rate)
                self._register(bending, method.key, node.name, meta)

    def attach(self, method: Method, entry: Entry) -> None:
        for bending in self._bendings:
            self.attach_one(bending, method, entry)

    def bend_value(self, method: str, node: torch.fx.Node, value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        for bending in self._bendings:
            if bending.applies(method, node.name):
                self._register(bending, method, node.name, (value.shape, value.dtype, value.device))
                value = bending.callback(value, f"{method}:{node.name}")
        return value

    def generators(self) -> list[Replayable]:
        found: dict[int, Replayable] = {}
        for cb in self.callbacks.modules():
            found.update((id(v), v) for v in vars(cb).values() if isinstance(v, torch.Generator))
            if isinstance(cb, Shaped):
                found[id(cb.steps)] = cb.counters()
        return [*found.values(), _Buffers(self.callbacks)]

    def build(self, method: Method, entry: Entry, module: nn.Module) -> None:
        slots: dict[str, list[BendingCallback]] = {}
        present = {n.name for n in entry.nodes(tensors_only=True)}
        for bending in self._bendings:
            for name in bending.activations.get(method.key, []):
                if name in present:
                    slots.setdefault(name, []).append(bending.callback)
        inputs = _computed_from_inputs(entry.graph)
        modules = {
            n: ActivationSlot(f"{method.key}:{n}", cbs, copy=n not in inputs)
            for n, cbs in slots.items()
        }
        name = f"Bended{self.owner}_{method.name}"
        entry.gm = build_graph_module(entry.result, module, modules, class_name=name)
        # The same graph with the bendings that can be folded into weights folded, for calls
        # without autograd (streaming, live): see torchbend.engine.folding.
        entry.folded = None
        if modules and can_fold(entry.gm):
            folded = build_graph_module(entry.result, module, modules, class_name=name)
            entry.folded = fold_slots(folded, module)


class _Buffers:
    """The buffers of callbacks (per-target state: the memory of a ``Filter(carry=True)``),
    saved and put back as a generator's state is: a run stopped half-way, or made to trace
    or to check, leaves them as the call found them."""

    def __init__(self, callbacks: nn.Module) -> None:
        self.callbacks = callbacks

    def get_state(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(b, b.detach().clone()) for b in self.callbacks.buffers()]

    def set_state(self, state: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        # A buffer drawn again in between (a new shape) is no longer the callback's: writing
        # its old value back into the tensor it replaced reaches nothing.
        with torch.no_grad():
            for b, value in state:
                b.copy_(value)


def _few(keys: Sequence[str]) -> str:
    return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def _computed_from_inputs(graph: torch.fx.Graph) -> set[str]:
    """The nodes of ``graph`` computed from at least one input: the others are computed from
    the module's weights and constants alone, and may share their memory."""
    found: set[str] = set()
    for node in graph.nodes:
        if node.op == "placeholder" or any(i.name in found for i in node.all_input_nodes):
            found.add(node.name)
    return found
