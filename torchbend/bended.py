"""BendedModule: the facade that traces, inspects, bends and runs a wrapped module; each job
belongs to the engine it delegates to (``torchbend/engine/``, see docs/architecture.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.fx
from torch import nn

from .callbacks.base import BendingCallback
from .callbacks.bend_options import Guard, Subset, Window
from .config import BendingConfig
from .controls import BendingParameter, Control, ControlValue
from .engine import BendedView, Bending, Engine, Restore
from .engine.tables import ActivationInfo, Table
from .tracing import FlowStep, TracedGraph
from .tracing.backends import Backend

__all__ = ["ActivationInfo", "BendedModule", "Bending"]

Patterns = str | Sequence[str] | None


class BendedModule(nn.Module):
    """Wraps a module to trace, inspect and bend its weights and activations.

    The wrapped module is never modified: bent weights live in copies, activation bendings in
    rewritten copies of the traced graphs. ``BendedModule`` is itself an ``nn.Module``:
    ``.to()``, ``.eval()``, ``state_dict()`` (the wrapped module under ``module.``, and the
    callbacks' state under ``callbacks.``) behave as usual.

    Args:
        module: the model to bend.
        leaves: module types or qualified names to keep as ``call_module`` leaves in graphs,
            besides the standard ``torch.nn`` layers (which always are).
        strict: when a call's inputs take a decision other than the traced one, raise a
            :class:`GuardError` naming it, instead of tracing a graph for those inputs.
        max_graphs: graphs kept per method before warning that inputs keep changing decisions.
        check: run each new graph once on the inputs it was traced with and raise a
            :class:`TracingError` if it does not give what the module gave (about one more
            call per trace; ``False`` only to trace in a hot loop, at your own risk).
        backend: what traces methods: ``"concrete"`` (the concrete tracer, with ``leaves``),
            ``"export"`` (torch.export), ``"auto"`` (the first whose graph passes the check),
            or a :class:`~torchbend.tracing.backends.TracingBackend`.

    Example:
        >>> import torch, torchbend as tb
        >>> bended = tb.BendedModule(torch.nn.Sequential(torch.nn.Conv1d(1, 4, 3)))
        >>> bended.trace(input=torch.randn(1, 1, 16)).__class__.__name__
        'TracedGraph'
        >>> bended.bend(tb.Scale(0.), "_0$")
        ['forward:_0']
        >>> bool((bended(torch.randn(1, 1, 16)) == 0).all())
        True

    Notes:
        Calls are matched to graphs by the facts of their inputs the traced decisions read
        (a dimension used by ``range``, a flag used by ``if``). A call with other facts is
        traced again once, which runs the model one more time; decisions read from tensor
        values are checked inside the graph, which costs a device synchronisation on GPU.
    """

    def __init__(
        self,
        module: nn.Module,
        *,
        leaves: Iterable[type | str] = (),
        strict: bool = False,
        max_graphs: int = 16,
        check: bool = True,
        backend: Backend | str = "auto",
    ) -> None:
        super().__init__()
        self.module = module
        # Held by calls and every change of state: an update (or a bend) from another thread
        # lands between two calls, never inside one.
        self._lock = threading.RLock()
        self._engine = Engine(module, leaves, strict, max_graphs, check, backend, dir(type(self)))
        self.callbacks = self._engine.bendings.callbacks

    def view(self) -> BendedView:
        """A read-only view of the traced methods, bendings, controls and weights."""
        return self._engine.view()

    def trace(
        self, fn: str = "forward", /, *args: Any, return_out: bool = False, **inputs: Any
    ) -> TracedGraph | tuple[TracedGraph, Any]:
        """Trace method ``fn`` on example inputs by argument name, or by position after ``fn``
        (``trace("forward", x, y)``; the extras of ``*args`` may be named ``args=(y,)`` too).

        Returns the :class:`TracedGraph` (a ``torch.fx.Graph`` whose ``flow_steps`` list the
        decisions baked in), or ``(graph, outputs)`` with ``return_out=True`` (also spelled
        ``_return_out``, as in the original torchbend notebooks). Bendings already set apply to
        the new graph too. ``backend="concrete" | "export" | "auto"`` traces this call with
        another backend (``_backend`` when ``fn`` has an argument ``backend``)."""
        return_out = bool(inputs.pop("_return_out", return_out))
        with self._lock:
            graph, outputs = self._engine.trace(fn, inputs, args)
        return (graph, outputs) if return_out else graph

    def traced_by(self, fn: str = "forward") -> str:
        """The backend that traced the graph ``fn`` runs now (``"concrete"``, ``"export"``,
        ``"torchscript"``)."""
        return self._engine.table.current(fn).backend

    @property
    def traced_methods(self) -> list[str]:
        """Names of the methods traced so far."""
        return self._engine.table.names()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.call("forward", *args, **kwargs)

    def call(self, fn: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call method ``fn``: its bended graph if traced, else the module's method with the bended
        weights; the flags such a method sets on modules (``set_streaming``) land on the wrapped
        module's own, as if called on it, and outlive later bendings (weights never change)."""
        with self._lock:
            return self._engine.call(fn, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        # Methods of the wrapped module (``bended.encode(x)``) run bended; nothing else is
        # forwarded, and looking an attribute up has no side effect.
        try:
            return super().__getattr__(name)
        except AttributeError:
            engine = self.__dict__.get("_engine")
            if engine is None or not engine.table.is_method(name):
                raise
            return lambda *args, **kwargs: self.call(name, *args, **kwargs)

    def bend(
        self,
        callback: BendingCallback | BendingConfig,
        *patterns: str,
        fn: Patterns = None,
        blend: float | Control | None = None,
        subset: float | Control | Subset | None = None,
        window: Window | tuple[float, float | None] | None = None,
        guard: bool | Guard | None = None,
    ) -> list[str]:
        """Bend the weights and activations matched by ``patterns`` with ``callback``.

        Patterns are regular expressions matched (``re.match``) against weight names
        (``weight_names``) and activation names of traced methods (``activation_names(fn)``);
        ``"encode:conv$"`` scopes a pattern to the activations of ``encode``; ``fn`` restricts
        unscoped patterns to some methods. Callbacks on one target apply in the order given.
        Returns the bent keys: weight names, and ``"<method>:<node>"``. ``callback`` may also be
        a :class:`BendingConfig`, whose bendings are applied in order.

        Options, for any callback (see :mod:`torchbend.engine.shaping`): ``blend`` mixes the bent
        value with the unbent one (0: unbent, bit for bit; may be a control); ``subset`` bends a
        fraction of the target's elements or, with ``tb.Subset(fraction, dim=...)``, of its
        channels; ``window`` bends activations only within ``tb.Window(start, end, ...)`` (samples
        of the time axis, or calls); ``guard=True`` (or a ``tb.Guard``) turns NaN and Inf into 0
        and limits how far the bent value may spread."""
        given = {"blend": blend, "subset": subset, "window": window, "guard": guard}
        with self._lock:
            return self._engine.bend_given(callback, patterns, fn, given)

    def bended_keys(self) -> list[str]:
        """Every bent target: weight names, then ``"<method>:<node>"`` activations."""
        return self._engine.bendings.keys()

    @property
    def bendings(self) -> list[Bending]:
        """The bendings applied, in order."""
        return list(self._engine.bendings)

    def select(self, *patterns: str, fn: Patterns = None) -> list[str]:
        """The keys ``bend`` would bend for ``patterns``, without bending anything."""
        return self._engine.select(patterns, fn)

    @property
    def guard(self) -> Guard | None:
        """The guard of every bending that gives none (``bend(..., guard=False)`` for none):
        ``bended.guard = tb.Guard(std=4.0)`` (or ``True``) applies it to the bendings made and to
        come; ``None`` removes it. Setting it applies the bendings again (ramps under way end)."""
        return self._engine.guard

    @guard.setter
    def guard(self, guard: bool | Guard | None) -> None:
        with self._lock:
            self._engine.set_guard(guard)

    @property
    def sample_rate(self) -> float | None:
        """The wrapped model's sample rate in Hz, for windows in seconds: set here, or read from
        the model's ``sample_rate`` (or ``sr``) attribute; ``None`` if neither."""
        return self._engine.sample_rate()

    @sample_rate.setter
    def sample_rate(self, rate: float | None) -> None:
        self._engine.set_sample_rate(rate)

    def mark(self, alias: str, target: str) -> None:
        """Name ``target`` (a weight, an activation ``"<method>:<node>"``, or a node of ``forward``)
        ``alias``: ``"#alias"`` then stands for it in any pattern (``bend``, ``get_activations``,
        configs, the command line). Aliases appear in tables and are saved in configs."""
        with self._lock:
            self._engine.mark(alias, target)

    @property
    def aliases(self) -> dict[str, str]:
        """The target of each alias given with :meth:`mark`."""
        return dict(self._engine.aliases.targets)

    def bending_config(self) -> BendingConfig:
        """The bendings applied, as a :class:`BendingConfig` (save it, apply it elsewhere)."""
        return self._engine.bending_config()

    def reset(self) -> None:
        """Remove every bending: outputs are the active version's again, bit for bit."""
        with self._lock:
            self._engine.reset()

    def capture(self) -> Restore:
        """Start every :class:`~torchbend.Capture` bending of this model; ``with`` stops them."""
        return self._engine.capture()

    def get_activations(
        self,
        *patterns: str,
        fn: str = "forward",
        bended: bool = True,
        as_tensordict: bool = False,
        save_as: str | None = None,
        **inputs: Any,
    ) -> Any:
        """Activations of ``fn`` matched by ``patterns`` on ``inputs``, by node name, computed up
        to the last one needed: of the unbent model (original weights, no activation bending) with
        ``bended=False``; a TensorDict of their common batch size with ``as_tensordict=True``.
        ``save_as`` keeps the cut graph as a method, bent like ``fn``: ``bended.<save_as>(...)``."""
        with self._lock:
            return self._engine.get_activations(
                patterns, fn, inputs, bended, as_tensordict, save_as
            )

    def from_activations(
        self,
        *names: str,
        fn: str = "forward",
        bended: bool = True,
        save_as: str | None = None,
        **values: Any,
    ) -> Any:
        """Run ``fn`` from given activations (``names``, valued in ``values``) to its output.

        The part of the graph that only fed those activations is dropped; inputs of ``fn`` still
        used past them must be given in ``values`` too, and run through a graph traced for inputs
        like them (their sizes, where decisions read them): else a :class:`TracingError` says which
        differ. ``save_as`` keeps the cut graph as a new method (``"decode_from_latent"``)."""
        with self._lock:
            return self._engine.from_activations(names, fn, values, bended, save_as)

    @property
    def controllables(self) -> dict[str, BendingParameter]:
        """The named controls of the bendings applied, by name."""
        return self._engine.board.controllables()

    def print_controls(self, out: str | Path | None = None) -> Table:
        """Table of the controls: value, the values each takes (its range and the bounds of the
        arguments it drives), clamp, ramp and widget (kind, unit, curve, label, group)."""
        return self._engine.print_controls(out)

    def update(self, name: str, value: ControlValue, *, ramp: bool = True) -> None:
        """Set control ``name`` to ``value``; the next call sees it (at once with ``ramp=False``,
        else spread over the control's ramp; a :class:`~torchbend.TensorParameter` takes a
        tensor, or a list, of its length at once). No re-trace and no recompilation: activation
        callbacks read controls when they run; weight bendings that read the control are bent
        again once, only the weights they bend (crossfaded over its ``ramp`` calls, if any)."""
        with self._lock:
            self._engine.board.update(name, value, ramp)

    @property
    def version(self) -> str:
        """Name of the weights version bendings apply to (``"original"`` by default)."""
        return self._engine.weights.active

    @property
    def versions(self) -> list[str]:
        """Names of the weights versions: ``"original"`` and those written or imported."""
        return self._engine.weights.names_of_versions()

    def write(self, version: str) -> None:
        """Freeze the current weights (bendings included) into version ``version``."""
        with self._lock:
            self._engine.weights.write(version)

    def create_version(
        self, version: str, weights: dict[str, torch.Tensor] | nn.Module, strict: bool = True
    ) -> None:
        """Import another checkpoint with the same weight names as version ``version``
        (``strict=False`` keeps the originals for weights it lacks)."""
        with self._lock:
            self._engine.import_version(version, weights, strict)

    def set_version(self, version: str) -> Restore:
        """Apply bendings to version ``version``; as a context manager, switch back after."""
        with self._lock:
            return self._engine.set_version(version)

    def interpolate(self, original: float | None = None, /, **weights: float) -> Restore:
        """Within ``with``, bend a normalized weighted mix of versions' weights:
        ``interpolate(1., crazy=1.)`` mixes the original (positional) and ``crazy`` half/half."""
        with self._lock:
            return self._engine.interpolate(original, weights)

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        with self._lock:
            super()._apply(fn, recurse)
            self._engine.apply(fn)
        return self

    def train(self, mode: bool = True) -> BendedModule:
        with self._lock:
            super().train(mode)
            self._engine.weights.refresh()
        return self

    def __getstate__(self) -> dict[str, Any]:
        raise self._engine.copy_refused()

    def bended_state_dict(self) -> dict[str, torch.Tensor]:
        """The wrapped module's state dict with bent weights in place of the originals."""
        return self._engine.bended_state_dict()

    @property
    def weight_names(self) -> list[str]:
        """Dotted names of the wrapped module's parameters."""
        return self._engine.weights.names()

    def weight(self, name: str) -> torch.Tensor:
        """The current value of weight ``name``: bent if bent, of the active version."""
        return self._engine.inspector.weight(name)

    def weight_shape(self, name: str) -> torch.Size:
        """Shape of weight ``name``."""
        return self.weight(name).shape

    def print_weights(
        self, flt: Patterns = None, exclude: Patterns = None, out: str | Path | None = None
    ) -> Table:
        """Table of weights (current values: bent where bent) with their statistics."""
        return self._engine.print_weights(flt, exclude, out)

    def activations(
        self,
        fn: str = "forward",
        op: Patterns = None,
        flt: Patterns = None,
        exclude: Patterns = None,
    ) -> list[ActivationInfo]:
        """Activations of the last graph traced for ``fn`` (tensor-valued nodes)."""
        return self._engine.inspector.activations(fn, op, flt, exclude)

    def activation_names(self, fn: str = "forward") -> list[str]:
        """Names of the activations of ``fn`` that ``bend`` patterns match (tensor values:
        :meth:`activations` also lists tuple outputs, whose items are bent instead)."""
        return [a.name for a in self.activations(fn) if a.is_tensor]

    def activation_shape(self, name: str, fn: str = "forward") -> Any:
        """Shape of activation ``name`` of ``fn``, as traced."""
        return self._engine.inspector.activation_shape(name, fn)

    def print_activations(
        self,
        fn: str = "forward",
        op: Patterns = None,
        flt: Patterns = None,
        exclude: Patterns = None,
        out: str | Path | None = None,
    ) -> Table:
        """Table of the activations of ``fn``: name, op, shape, dtype (and aliases)."""
        return self._engine.print_activations(fn, op, flt, exclude, out)

    def graph(self, fn: str = "forward") -> TracedGraph:
        """The last graph traced for ``fn`` (unbent; ``graph.flow_steps`` lists decisions)."""
        return self._engine.table.current(fn).graph

    def graphs(self, fn: str = "forward") -> list[TracedGraph]:
        """Every graph traced for ``fn``, one per set of decisions, newest first."""
        return self._engine.inspector.graphs(fn)

    def graph_module(self, fn: str = "forward") -> torch.fx.GraphModule:
        """The bended GraphModule that runs for ``fn`` on inputs like the last traced ones."""
        return self._engine.inspector.graph_module(fn)

    def flow_steps(self, fn: str = "forward") -> list[FlowStep]:
        """The decisions baked into the last graph traced for ``fn``."""
        return list(self._engine.table.current(fn).result.flow_steps)

    def print_graph(self, fn: str = "forward", out: str | Path | None = None) -> str:
        """Print the bended graph of ``fn``: the traced graph with its bending slots."""
        return self._engine.inspector.print_graph(fn, out)
