"""BendedModule: the facade that traces, inspects, bends and runs a wrapped module.

Each job belongs to a part it delegates to (``torchbend/parts/``, see docs/architecture.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.fx
from torch import nn

from .callbacks.base import BendingCallback
from .callbacks.rewire import Rewire
from .callbacks.shaping import Guard, Subset, Window, options, shaping
from .config import BendingConfig
from .controls import BendingParameter, Control
from .errors import BendingError, SelectionError, TracingError
from .parts.activations import from_activations, get_activations, to_tensordict
from .parts.backend import Backend
from .parts.bendings import Bending, BendingSet, check_callback, rewire_sources
from .parts.board import ControlBoard
from .parts.inspection import Inspector
from .parts.methods import MethodTable, make_backend
from .parts.view import BendedView, Restore
from .selection import Aliases, Selection, select
from .tables import ActivationInfo, Table, activations_table, show
from .tracing import FlowStep, TracedGraph
from .weights import WeightBank, weight_holder

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
            or a :class:`~torchbend.parts.backend.TracingBackend`.

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
        if not isinstance(module, nn.Module):
            raise TracingError(
                f"BendedModule wraps an nn.Module, got {type(module).__name__}; wrap plain "
                "functions in an nn.Module whose forward calls them."
            )
        super().__init__()
        self.module = module
        self._lock = threading.RLock()
        """Held by calls and by every change of state, so that an ``update`` (or a ``bend``)
        from another thread lands between two calls, never inside one."""
        self._weights = weights = WeightBank(weight_holder(module))
        self._bendings = bendings = BendingSet(type(module).__name__, lambda: weights.view)
        self._aliases = Aliases()
        self._sample_rate: float | None = None
        self._guard: Guard | None = None
        bendings.sample_rate = lambda: self.sample_rate
        self.callbacks = bendings.callbacks
        self._backend_named = partial(make_backend, leaves=tuple(leaves), module=module)
        backend, view = self._backend_named(backend), weights.synced_view
        table = MethodTable(module, backend, bendings, view, strict, max_graphs, check)
        self._methods, self._board = table, ControlBoard(bendings, weights)
        self._inspector = Inspector(table, weights)
        weights.listeners.append(table.install_view)
        weights.bender = (bendings.weights, bendings.bend_weight)
        table.reserved = set(dir(type(self)))

    def view(self) -> BendedView:
        """A read-only view of the traced methods, bendings, controls and weights."""
        return BendedView(self.module, self._methods, self._bendings, self._board, self._weights)

    # -- tracing and calling ----------------------------------------------------------------------

    def trace(
        self, fn: str = "forward", /, *, return_out: bool = False, **inputs: Any
    ) -> TracedGraph | tuple[TracedGraph, Any]:
        """Trace method ``fn`` on example ``inputs`` given by argument name.

        Returns the :class:`TracedGraph` (a ``torch.fx.Graph`` whose ``flow_steps`` list the
        decisions baked in),
        or ``(graph, outputs)`` with ``return_out=True`` (also spelled ``_return_out``, as in
        the original torchbend notebooks). Bendings already set apply to the new graph too.
        ``backend="concrete" | "export" | "auto"`` traces this call with another backend than
        the module's (spelled ``_backend`` when ``fn`` has an argument named ``backend``);
        :meth:`traced_by` says which one traced.
        """
        with self._lock:
            return_out = bool(inputs.pop("_return_out", return_out))
            backend = inputs.pop("_backend", None)
            if backend is None and "backend" not in self._methods.method(fn).signature.names:
                backend = inputs.pop("backend", None)
            override = None if backend is None else self._backend_named(backend)
            entry, result = self._methods.trace(fn, inputs, override)
            return (entry.graph, result.outputs) if return_out else entry.graph

    def traced_by(self, fn: str = "forward") -> str:
        """The backend that traced the graph ``fn`` runs now (``"concrete"``, ``"export"``,
        ``"torchscript"``)."""
        return self._methods.current(fn).backend

    @property
    def traced_methods(self) -> list[str]:
        """Names of the methods traced so far."""
        return self._methods.names()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.call("forward", *args, **kwargs)

    def call(self, fn: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call method ``fn``: its bended graph if traced, else the module's method with the
        bended weights; the flags such a method sets on modules (``set_streaming``) land on
        the wrapped module's own, as if called on it, and outlive later bendings (weights
        are never changed)."""
        with self._lock:
            traced = self._methods.get(fn) is not None
            out = self._methods.call(fn, args, kwargs)
            if not traced:
                # An untraced method runs on the view: what it set on the copies of bent
                # modules (set_streaming's flags) must outlive them, as on the shared ones.
                self._weights.give_back()
            if self._board.ramping:
                self._board.advance()
            return out

    def __getattr__(self, name: str) -> Any:
        # Methods of the wrapped module (``bended.encode(x)``) run bended; nothing else is
        # forwarded, and looking an attribute up has no side effect.
        try:
            return super().__getattr__(name)
        except AttributeError:
            table = self.__dict__.get("_methods")
            if table is None or not table.is_method(name):
                raise
            return lambda *args, **kwargs: self.call(name, *args, **kwargs)

    # -- bending ---------------------------------------------------------------------------------

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
        unscoped patterns to some methods. Several callbacks on one target apply in the order
        they were given. Returns the bent keys: weight names, and ``"<method>:<node>"``.
        ``callback`` may also be a :class:`BendingConfig`, whose bendings are applied in order.

        How the callback applies, for any callback (see :mod:`torchbend.callbacks.shaping`):
        ``blend`` mixes the bent value with the unbent one (0: unbent, bit for bit; may be a
        control); ``subset`` bends a fraction of the target's elements or, with
        ``tb.Subset(fraction, dim=...)``, of its channels; ``window`` bends activations only
        within ``tb.Window(start, end, ...)`` (samples of the time axis, or calls);
        ``guard=True`` (or a ``tb.Guard``) turns NaN and Inf into 0 and limits how far the
        bent value may spread.
        """
        with self._lock:
            if isinstance(callback, BendingConfig):
                if patterns or any(o is not None for o in (blend, subset, window, guard)):
                    raise SelectionError(
                        "bend(config) takes no patterns or options: the config holds them"
                    )
                for alias, target in callback.aliases.items():
                    self.mark(alias, target)
                keys: list[str] = []
                for item in callback:
                    keys += [
                        k
                        for k in self.bend(
                            item.callback, *item.patterns, fn=item.fn, **item.options
                        )
                        if k not in keys
                    ]
                return keys
            check_callback(callback, patterns, self.weight_names)
            given = options(blend, subset, window, guard)
            fns = fn if fn is None or isinstance(fn, str) else tuple(fn)
            expanded = self._aliases.expand(patterns)
            selection = self._select(expanded, fns)
            applied: BendingCallback = callback
            if isinstance(callback, Rewire):
                if given:
                    raise BendingError(f"Rewire takes no {', '.join(given)}: its amount is the mix")
                expanded += rewire_sources(callback, selection, self._methods.entries())
                selection = self._select(expanded, fns)
            else:
                applied = shaping(callback, given, self._guard)
            self._board.check(applied)
            originals = {w: self._weights.original(w) for w in selection.weights}
            bending = self._bendings.add(
                applied, patterns, fns, selection, originals, expanded, given, callback
            )
            bent = dict(self._weights.bent)
            try:
                for method, entry in self._methods.entries():
                    self._bendings.attach_one(bending, method, entry)
                if bending.weights:
                    self._weights.rebend(bending.weights)
                self._methods.rebuild(list(bending.activations))
            except BaseException:  # all or nothing: the module is left as it was
                self._bendings.remove(bending)
                self._weights.set(bent)
                self._methods.rebuild(list(bending.activations))
                raise
            self._bendings.warnings_for(bending, self._methods.entries(), self._methods.flips)
            return selection.keys()

    def bended_keys(self) -> list[str]:
        """Every bent target: weight names, then ``"<method>:<node>"`` activations."""
        return self._bendings.keys()

    @property
    def bendings(self) -> list[Bending]:
        """The bendings applied, in order."""
        return list(self._bendings)

    def select(self, *patterns: str, fn: Patterns = None) -> list[str]:
        """The keys ``bend`` would bend for ``patterns``, without bending anything."""
        fns = fn if fn is None or isinstance(fn, str) else tuple(fn)
        return self._select(self._aliases.expand(patterns), fns).keys()

    def _select(self, patterns: Sequence[str], fns: str | tuple[str, ...] | None) -> Selection:
        """The targets of ``patterns``, their aliases replaced already."""
        owner = type(self.module).__name__
        bendable = self._methods.bendable()
        try:
            return select(patterns, self._weights.names(), bendable, fns, owner=owner)
        except SelectionError as e:
            raise SelectionError(f"{e}{self._methods.why_not_bendable(patterns)}") from None

    @property
    def guard(self) -> Guard | None:
        """The guard of every bending that gives none (``bend(..., guard=False)`` for none):
        ``bended.guard = tb.Guard(std=4.0)`` (or ``True``) applies it to the bendings made
        and to come; ``None`` removes it. Setting it applies the bendings again (ramps under
        way end)."""
        return self._guard

    @guard.setter
    def guard(self, guard: bool | Guard | None) -> None:
        if guard is True:
            guard = Guard()
        if guard is False:
            guard = None
        if guard is not None and not isinstance(guard, Guard):
            raise BendingError(f"guard is True, False, None or a tb.Guard, got {guard!r}")
        with self._lock:
            config = self.bending_config()
            before = self._guard
            self._guard = guard
            if before == guard or not len(config):
                return
            self.reset()
            self.bend(config)

    @property
    def sample_rate(self) -> float | None:
        """The wrapped model's sample rate in Hz, for windows in seconds: set here, or read
        from the model's ``sample_rate`` (or ``sr``) attribute; ``None`` if neither."""
        if self._sample_rate is not None:
            return self._sample_rate
        for attribute in ("sample_rate", "sr"):
            value = getattr(self.module, attribute, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return float(value)
        return None

    @sample_rate.setter
    def sample_rate(self, rate: float | None) -> None:
        if rate is not None and (
            isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0
        ):
            raise BendingError(f"sample_rate is a number of Hz > 0 (or None), got {rate!r}")
        self._sample_rate = None if rate is None else float(rate)

    def mark(self, alias: str, target: str) -> None:
        """Name ``target`` (a weight, an activation ``"<method>:<node>"``, or a node of
        ``forward``) ``alias``: ``"#alias"`` then stands for it in any pattern (``bend``,
        ``get_activations``, configs, the command line). Aliases appear in tables and are
        saved in configs."""
        with self._lock:
            keys = [*self._weights.names()]
            for method, nodes in self._methods.bendable().items():
                keys += [f"{method}:{n}" for n in nodes]
            if isinstance(target, str) and ":" not in target and target not in keys:
                target = f"forward:{target}"
            used = [p for b in self._bendings for p in b.patterns]
            self._aliases.mark(alias, target, keys, used)

    @property
    def aliases(self) -> dict[str, str]:
        """The target of each alias given with :meth:`mark`."""
        return dict(self._aliases.targets)

    def bending_config(self) -> BendingConfig:
        """The bendings applied, as a :class:`BendingConfig` (save it, apply it elsewhere)."""
        config = self._bendings.config()
        config.aliases = dict(self._aliases.targets)
        return config

    def reset(self) -> None:
        """Remove every bending: outputs are again those of the active version (the wrapped
        module's own by default), bit for bit."""
        with self._lock:
            self._bendings.clear()
            self._board.clear()
            # The active version's own weights (a mix left by interpolate() without `with` too).
            self._weights.set_base(self._weights.base_of(self._weights.active))
            self._weights.set({})
            self._methods.rebuild()

    def capture(self) -> Restore:
        """Start every :class:`~torchbend.Capture` bending of this model; ``with`` stops them."""
        return Restore(self._bendings.capture())

    # -- activations in and out ------------------------------------------------------------------

    def get_activations(
        self,
        *patterns: str,
        fn: str = "forward",
        bended: bool = True,
        as_tensordict: bool = False,
        save_as: str | None = None,
        **inputs: Any,
    ) -> Any:
        """Activations of ``fn`` matched by ``patterns`` on ``inputs``, by node name.

        Computation stops after the last activation needed. ``bended=False`` gives the values
        of the unbent model (original weights, no activation bending). ``as_tensordict=True``
        returns a TensorDict with the activations' common batch size. ``save_as`` keeps the
        truncated graph as a new method (``bended.<save_as>(**inputs)``), bent like ``fn``.
        """
        with self._lock:
            expanded = self._aliases.expand(patterns)
            values = get_activations(self._methods, expanded, fn, inputs, bended, save_as)
            return to_tensordict(values) if as_tensordict else values

    def from_activations(
        self,
        *names: str,
        fn: str = "forward",
        bended: bool = True,
        save_as: str | None = None,
        **values: Any,
    ) -> Any:
        """Run ``fn`` from given activations (``names``, valued in ``values``) to its output.

        The part of the graph that only fed those activations is dropped; inputs of ``fn``
        still used past them must be given in ``values`` too, and run through a graph traced
        for inputs like them (their sizes, where decisions read them): else a
        :class:`TracingError` says which differ. ``save_as`` keeps the cut graph
        as a new method, e.g. ``save_as="decode_from_latent"``.
        """
        with self._lock:
            return from_activations(self._methods, names, fn, values, bended, save_as)

    # -- controls --------------------------------------------------------------------------------

    @property
    def controllables(self) -> dict[str, BendingParameter]:
        """The named controls of the bendings applied, by name."""
        return self._board.controllables()

    def print_controls(self, out: str | Path | None = None) -> Table:
        """Table of the controls: value, the values each takes (its range and the bounds of
        the arguments it drives), clamp, ramp and widget (kind, unit, curve, label, group)."""
        return show(self._board.table(), out)

    def update(self, name: str, value: float | int | bool, *, ramp: bool = True) -> None:
        """Set control ``name`` to ``value``; the next call sees it (at once with
        ``ramp=False``, else spread over the control's ramp).

        No re-trace and no recompilation: activation callbacks read controls when they run;
        weight bendings that depend on the control are recomputed once, only for the weights
        they bend (crossfaded over ``ramp`` calls if the control has a ramp).
        """
        with self._lock:
            self._board.update(name, value, ramp)

    # -- versions --------------------------------------------------------------------------------

    @property
    def version(self) -> str:
        """Name of the weights version bendings apply to (``"original"`` by default)."""
        return self._weights.active

    @property
    def versions(self) -> list[str]:
        """Names of the weights versions: ``"original"`` and those written or imported."""
        return self._weights.names_of_versions()

    def write(self, version: str) -> None:
        """Freeze the current weights (bendings included) into version ``version``."""
        with self._lock:
            self._weights.write(version)

    def create_version(
        self, version: str, weights: dict[str, torch.Tensor] | nn.Module, strict: bool = True
    ) -> None:
        """Import another checkpoint with the same weight names as version ``version``
        (``strict=False`` keeps the originals for weights it lacks)."""
        state = weights.state_dict() if isinstance(weights, nn.Module) else dict(weights)
        with self._lock:
            self._weights.import_version(version, state, strict)

    def set_version(self, version: str) -> Restore:
        """Apply bendings to version ``version``; as a context manager, switch back after."""
        with self._lock:
            return Restore(self._weights.rebase(version, self._weights.base_of(version)))

    def interpolate(self, original: float | None = None, /, **weights: float) -> Restore:
        """Within ``with``, bend a normalized weighted mix of versions' weights:
        ``with bended.interpolate(1., crazy=1.): ...`` mixes the original weights (the
        positional weight) and version ``crazy`` half and half."""
        if original is not None:
            weights = {WeightBank.ORIGINAL: original, **weights}
        with self._lock:
            return Restore(self._weights.rebase(self._weights.active, self._weights.mix(weights)))

    # -- nn.Module behaviour -----------------------------------------------------------------------

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        with self._lock:
            super()._apply(fn, recurse)
            self._weights.apply(fn)
            self._methods.map_constants(fn)
            self._methods.rebuild()
        return self

    def train(self, mode: bool = True) -> BendedModule:
        with self._lock:
            super().train(mode)
            self._weights.refresh()
        return self

    def __getstate__(self) -> dict[str, Any]:
        # Graphs, views and slots point at the wrapped module's tensors and at each other: a
        # copy made attribute by attribute would run on a mix of the two modules' weights.
        raise BendingError(
            f"a BendedModule of {type(self.module).__name__} cannot be copied or pickled; "
            "wrap a copy of the model and bend it the same way: "
            "tb.BendedModule(copy.deepcopy(model)).bend(bended.bending_config()) after "
            "tracing it, or save the bending with bended.bending_config().save(path)"
        )

    def bended_state_dict(self) -> dict[str, torch.Tensor]:
        """The wrapped module's state dict with bent weights in place of the originals."""
        state: dict[str, torch.Tensor] = dict(self.module.state_dict())
        state.update({name: t.detach() for name, t in self._weights.bent.items()})
        return state

    # -- inspection --------------------------------------------------------------------------------

    @property
    def weight_names(self) -> list[str]:
        """Dotted names of the wrapped module's parameters."""
        return self._weights.names()

    def weight(self, name: str) -> torch.Tensor:
        """The current value of weight ``name``: bent if bent, of the active version."""
        return self._inspector.weight(name)

    def weight_shape(self, name: str) -> torch.Size:
        """Shape of weight ``name``."""
        return self.weight(name).shape

    def print_weights(
        self, flt: Patterns = None, exclude: Patterns = None, out: str | Path | None = None
    ) -> Table:
        """Table of weights (current values: bent where bent) with their statistics."""
        aliases = {w: self._aliases.of(w) for w in self._weights.names()}
        return self._inspector.print_weights(flt, exclude, out, aliases)

    def activations(
        self,
        fn: str = "forward",
        op: Patterns = None,
        flt: Patterns = None,
        exclude: Patterns = None,
    ) -> list[ActivationInfo]:
        """Activations of the last graph traced for ``fn`` (tensor-valued nodes)."""
        return self._inspector.activations(fn, op, flt, exclude)

    def activation_names(self, fn: str = "forward") -> list[str]:
        """Names of the activations of ``fn`` that ``bend`` patterns match (tensor values:
        :meth:`activations` also lists tuple outputs, whose items are bent instead)."""
        return [a.name for a in self.activations(fn) if a.is_tensor]

    def activation_shape(self, name: str, fn: str = "forward") -> Any:
        """Shape of activation ``name`` of ``fn``, as traced."""
        return self._inspector.activation_shape(name, fn)

    def print_activations(
        self,
        fn: str = "forward",
        op: Patterns = None,
        flt: Patterns = None,
        exclude: Patterns = None,
        out: str | Path | None = None,
    ) -> Table:
        """Table of the activations of ``fn``: name, op, shape, dtype (and aliases)."""
        infos = self.activations(fn, op, flt, exclude)
        key = self._methods.method(fn).key
        aliases = {a.name: self._aliases.of(f"{key}:{a.name}") for a in infos}
        return show(activations_table(infos, aliases), out)

    def graph(self, fn: str = "forward") -> TracedGraph:
        """The last graph traced for ``fn`` (unbent; ``graph.flow_steps`` lists decisions)."""
        return self._methods.current(fn).graph

    def graphs(self, fn: str = "forward") -> list[TracedGraph]:
        """Every graph traced for ``fn``, one per set of decisions, newest first."""
        return self._inspector.graphs(fn)

    def graph_module(self, fn: str = "forward") -> torch.fx.GraphModule:
        """The bended GraphModule that runs for ``fn`` on inputs like the last traced ones."""
        return self._inspector.graph_module(fn)

    def flow_steps(self, fn: str = "forward") -> list[FlowStep]:
        """The decisions baked into the last graph traced for ``fn``."""
        return list(self._methods.current(fn).result.flow_steps)

    def print_graph(self, fn: str = "forward", out: str | Path | None = None) -> str:
        """Print the bended graph of ``fn``: the traced graph with its bending slots."""
        return self._inspector.print_graph(fn, out)
