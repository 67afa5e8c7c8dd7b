"""BendedModule: the facade that traces, inspects, bends and runs a wrapped module."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx
from torch import nn

from .activations import cut_from, keep_until
from .callbacks.base import BendingCallback
from .callbacks.capture import Capture
from .config import BendingConfig, ConfigItem
from .controls import BendingParameter
from .dispatch import Entry, Method, Signature, clone_inputs
from .errors import BendingError, GuardError, SelectionError, TracingError, closest
from .rewriting import ActivationSlot, bent_graph, build_graph_module, install_view
from .selection import Selection, matches, select
from .tables import ActivationInfo, Table, activation_infos, activations_table, show, weights_table
from .tracing import BendingTracer, DecisionChanged, FlowStep, TraceResult
from .tracing.facts import describe_fact
from .tracing.tensordict import TensorDictProgram, is_tensordict_module
from .weights import WeightBank

__all__ = ["ActivationInfo", "BendedModule", "Bending"]


@dataclass
class Bending:
    """One call of :meth:`BendedModule.bend`: a callback and the targets it bends."""

    callback: BendingCallback
    patterns: tuple[str, ...]
    fn: str | tuple[str, ...] | None
    weights: list[str]
    activations: dict[str, list[str]]
    registered: set[str] = field(default_factory=set)


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

    Example:
        >>> import torch, torchbend as tb
        >>> bended = tb.BendedModule(torch.nn.Sequential(torch.nn.Conv1d(1, 4, 3)))
        >>> bended.trace(input=torch.randn(1, 1, 16)).__class__.__name__
        'Graph'
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
    ) -> None:
        if not isinstance(module, nn.Module):
            raise TracingError(
                f"BendedModule wraps an nn.Module, got {type(module).__name__}; wrap plain "
                "functions in an nn.Module whose forward calls them."
            )
        super().__init__()
        self.module = module
        self.callbacks = nn.ModuleList()
        self.leaves = tuple(leaves)
        self.strict = strict
        self.max_graphs = max_graphs
        self._weights = WeightBank(module)
        self._methods: dict[str, Method] = {}
        self._bendings: list[Bending] = []
        self._active_version = WeightBank.ORIGINAL
        self._ramping: dict[str, BendingParameter] = {}
        self._control_map: dict[str, tuple[BendingParameter, list[Bending]]] | None = None
        self._fades: dict[str, tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]] = {}

    # -- tracing ---------------------------------------------------------------------------------

    def trace(
        self,
        fn: str = "forward",
        /,
        *,
        return_out: bool = False,
        _return_out: bool = False,
        **inputs: Any,
    ) -> Any:
        """Trace method ``fn`` on example ``inputs`` given by argument name.

        Returns the traced ``torch.fx.Graph`` (its ``flow_steps`` list the decisions baked in),
        or ``(graph, outputs)`` with ``return_out=True`` (``_return_out`` is the same flag, as
        spelled in the original torchbend notebooks). Bendings already set apply to the new
        graph as well.
        """
        method = self._method(fn)
        try:
            bound = method.signature.bind((), inputs)
            entry, result = self._trace_entry(method, bound)
        except Exception:
            if not method.entries:
                del self._methods[fn]
            raise
        method.current = entry
        if return_out or _return_out:
            return entry.graph, result.outputs
        return entry.graph

    @property
    def traced_methods(self) -> list[str]:
        """Names of the methods traced so far."""
        return list(self._methods)

    def _method(self, fn: str) -> Method:
        method = self._methods.get(fn)
        if method is None:
            impl = getattr(self.module, fn, None)
            if not callable(impl) or isinstance(impl, nn.Module):
                names = [n for n in dir(type(self.module)) if not n.startswith("_")]
                hint = closest(fn, names)
                raise TracingError(
                    f"{type(self.module).__name__} has no method {fn!r}"
                    + (f"; did you mean {hint[0]!r}?" if hint else "")
                )
            if fn == "forward" and is_tensordict_module(self.module):
                impl = TensorDictProgram.forward.__get__(self.module)
            method = Method(fn, Signature(type(self.module).__name__, fn, impl))
            self._methods[fn] = method
        return method

    def _trace_entry(self, method: Method, inputs: dict[str, Any]) -> tuple[Entry, TraceResult]:
        tracer = BendingTracer(self.leaves)
        tracer.on_value = functools.partial(self._bend_traced_value, method.name)
        root = self._weights.view
        if method.name == "forward" and is_tensordict_module(root):
            root = TensorDictProgram(root)
        result = tracer.trace_method(root, method.name, clone_inputs(inputs))
        training = self.module.training
        for entry in method.entries:
            if entry.same_decisions(result, training):
                entry.keys.add(entry.key(inputs))
                return entry, result
        entry = Entry(result, training, method.signature.names)
        entry.keys.add(entry.key(inputs))
        if method.entries and self.strict:
            raise GuardError(self._describe_change(method, result))
        method.entries.insert(0, entry)
        if len(method.entries) > self.max_graphs:
            warnings.warn(
                f"{type(self.module).__name__}.{method.name} now has {len(method.entries)} "
                "traced graphs: its inputs keep taking new decisions "
                f"({self._describe_change(method, result)}). Each new one costs a trace.",
                stacklevel=3,
            )
        self._attach_bendings(method, entry)
        self._build(method, entry)
        if method.current is None:
            method.current = entry
        return entry, result

    def _describe_change(self, method: Method, result: TraceResult) -> str:
        old = method.current or method.entries[0]
        label = f"{type(self.module).__name__}.{method.name}"
        for i, new_step in enumerate(result.flow_steps):
            if i >= len(old.result.flow_steps):
                return f"{label} took a decision the traced graph does not have: {_step(new_step)}"
            old_step = old.result.flow_steps[i]
            if (old_step.name, old_step.value) != (new_step.name, new_step.value):
                return (
                    f"{label}: decision {old_step.kind} '{old_step.name}' at {old_step.file} "
                    f"({old_step.function}) was {old_step.value!r} when traced, "
                    f"now {new_step.value!r}"
                )
        facts = ", ".join(describe_fact(f) for f in old.facts) or "none"
        return f"{label} traced a different graph for these inputs (facts read: {facts})"

    # -- calling ---------------------------------------------------------------------------------

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("forward", args, kwargs)

    def call(self, fn: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call method ``fn``: its bended graph if traced, else the module's method with the
        bended weights."""
        return self._call(fn, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name in self.__dict__.get("_methods", {}):
                return functools.partial(self.call, name)
            module = self.__dict__.get("_modules", {}).get("module")
            attr = getattr(module, name, None) if not name.startswith("_") else None
            if attr is None or not callable(attr) or isinstance(attr, nn.Module):
                raise
            return functools.partial(self.call, name)

    def _call(self, fn: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        method = self._methods.get(fn)
        if method is None:
            return getattr(self._weights.view, fn)(*args, **kwargs)
        inputs = method.signature.bind(args, kwargs)
        training = self.module.training
        changed: tuple[Entry, DecisionChanged] | None = None
        for entry in method.entries:
            if entry.training is training and entry.key(inputs) in entry.keys:
                assert entry.gm is not None
                try:
                    # forward, not __call__: GraphModules carry no hooks, and this is the hot path.
                    out = entry.gm.forward(*[inputs[n] for n in entry.input_names])
                except DecisionChanged as e:
                    changed = (entry, e)
                    continue
                if self._ramping:
                    self._advance_controls()
                return out
        return self._call_new_graph(method, inputs, changed)

    def _call_new_graph(
        self,
        method: Method,
        inputs: dict[str, Any],
        changed: tuple[Entry, DecisionChanged] | None,
    ) -> Any:
        if changed is not None and self.strict:
            entry, e = changed
            step = entry.result.flow_steps[e.step]
            raise GuardError(
                f"{type(self.module).__name__}.{method.name}: decision {step.kind} '{step.name}' "
                f"at {step.file} ({step.function}) was {e.expected!r} when traced, now "
                f"{e.got!r}. Set strict=False to trace a graph for these inputs."
            ) from None
        entry, _ = self._trace_entry(method, inputs)
        assert entry.gm is not None
        try:
            return entry.gm(*[inputs[n] for n in entry.input_names])
        except DecisionChanged as e:
            step = entry.result.flow_steps[e.step]
            raise TracingError(
                f"{type(self.module).__name__}.{method.name}: decision {step.kind} '{step.name}' "
                f"at {step.file} was {e.expected!r} while tracing these inputs and {e.got!r} when "
                "running them: it depends on values drawn anew at each call (a random "
                "constructor, or a Noise bending on an activation before it)."
            ) from None

    # -- bending ---------------------------------------------------------------------------------

    def bend(
        self,
        callback: BendingCallback | BendingConfig,
        *patterns: str,
        fn: str | Sequence[str] | None = None,
    ) -> list[str]:
        """Bend the weights and activations matched by ``patterns`` with ``callback``.

        Patterns are regular expressions matched (``re.match``) against weight names
        (``weight_names``) and activation names of traced methods (``activation_names(fn)``);
        ``"encode:conv$"`` scopes a pattern to the activations of ``encode``; ``fn`` restricts
        unscoped patterns to some methods. Several callbacks on one target apply in the order
        they were given. Returns the bent keys: weight names, and ``"<method>:<node>"``.
        ``callback`` may also be a :class:`BendingConfig`, whose bendings are applied in order.
        """
        if isinstance(callback, BendingConfig):
            if patterns:
                raise SelectionError("bend(config) takes no patterns: the config holds them")
            keys: list[str] = []
            for item in callback:
                keys += [
                    k for k in self.bend(item.callback, *item.patterns, fn=item.fn) if k not in keys
                ]
            return keys
        if isinstance(callback, type) and issubclass(callback, BendingCallback):
            raise BendingError(
                f"bend() takes a callback instance, got the class {callback.__name__}; "
                f"call it: {callback.__name__}(...)"
            )
        if not isinstance(callback, BendingCallback):
            raise BendingError(
                f"bend() takes a BendingCallback (tb.Mask(), tb.Scale()...), got "
                f"{type(callback).__name__}: {callback!r}"
            )
        if not patterns:
            raise SelectionError(
                "bend() needs at least one pattern, e.g. bended.bend(tb.Mask(0.3), 'conv$'); "
                f"weights: {self.weight_names[:5]}..."
            )
        fns = fn if fn is None or isinstance(fn, str) else tuple(fn)
        selection = self._select(patterns, fns)
        self._check_controls(callback)
        bending = Bending(callback, tuple(patterns), fns, selection.weights, selection.activations)
        for name in bending.weights:
            w = self._weights.original(name)
            callback.register(name, w.shape, w.dtype, w.device)
        self._bendings.append(bending)
        self._control_map = None
        if not any(cb is callback for cb in self.callbacks):
            self.callbacks.append(callback)
        for method in self._methods.values():
            for entry in method.entries:
                self._attach_bending(bending, method, entry)
        if bending.weights:
            self._update_weights(bending.weights)
        for method in self._methods.values():
            if method.key in bending.activations:
                for entry in method.entries:
                    self._build(method, entry)
        return selection.keys()

    def bended_keys(self) -> list[str]:
        """Every bent target: weight names, then ``"<method>:<node>"`` activations."""
        keys: list[str] = []
        for b in self._bendings:
            for key in b.weights + [f"{m}:{n}" for m, ns in b.activations.items() for n in ns]:
                if key not in keys:
                    keys.append(key)
        return keys

    @property
    def bendings(self) -> list[Bending]:
        """The bendings applied, in order."""
        return list(self._bendings)

    def select(self, *patterns: str, fn: str | Sequence[str] | None = None) -> list[str]:
        """The keys ``bend`` would bend for ``patterns``, without bending anything."""
        fns = fn if fn is None or isinstance(fn, str) else tuple(fn)
        return self._select(patterns, fns).keys()

    def _select(self, patterns: Sequence[str], fns: str | tuple[str, ...] | None) -> Selection:
        return select(
            patterns,
            self._weights.names(),
            self._bendable(),
            fns,
            owner=type(self.module).__name__,
        )

    def bending_config(self) -> BendingConfig:
        """The bendings applied, as a :class:`BendingConfig` (save it, apply it elsewhere)."""
        return BendingConfig(
            *[ConfigItem(b.callback, b.patterns, b.fn, self._keys_of(b)) for b in self._bendings]
        )

    @staticmethod
    def _keys_of(b: Bending) -> list[str]:
        return b.weights + [f"{m}:{n}" for m, ns in b.activations.items() for n in ns]

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
        method = self._method(fn)
        entry = self._entry_for(method, method.signature.bind((), inputs))
        names = self._activation_names(method, entry, patterns)
        graph = keep_until(entry.graph, names)
        values = self._run_derived(method, entry, graph, inputs, bended, save_as)
        if not as_tensordict:
            return values
        try:
            from tensordict import TensorDict
        except ImportError as e:
            raise ImportError(
                "as_tensordict=True needs tensordict: pip install torchbend[tensordict]"
            ) from e
        sizes = {v.shape[0] for v in values.values() if isinstance(v, torch.Tensor) and v.dim()}
        return TensorDict(values, batch_size=[sizes.pop()] if len(sizes) == 1 else [])

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
        still used past them must be given in ``values`` too. ``save_as`` keeps the cut graph
        as a new method, e.g. ``save_as="decode_from_latent"``.
        """
        method = self._method(fn)
        if not names:
            raise SelectionError("from_activations() needs the names of the activations to inject")
        entry = self._traced(fn) if method.current is not None else None
        if entry is None:
            raise TracingError(f"trace {fn!r} first: bended.trace({fn!r}, <example inputs>)")
        names = tuple(self._activation_names(method, entry, [f"{n}$" for n in names], exact=names))
        graph = cut_from(entry.graph, names)
        needed = [str(n.target) for n in graph.nodes if n.op == "placeholder"]
        missing = [n for n in needed if n not in values]
        unknown = [v for v in values if v not in needed]
        if missing or unknown:
            raise TracingError(
                f"from_activations({', '.join(map(repr, names))}) of {fn} takes {needed}; "
                f"missing {missing}, unknown {unknown}"
            )
        return self._run_derived(method, entry, graph, values, bended, save_as)

    def _activation_names(
        self, method: Method, entry: Entry, patterns: Sequence[str], exact: Sequence[str] = ()
    ) -> list[str]:
        available = [n.name for n in entry.nodes(tensors_only=True)]
        for name in exact:
            if name not in available:
                hint = closest(name, available)
                raise SelectionError(
                    f"{method.name} has no activation {name!r}"
                    + (f"; did you mean {' or '.join(map(repr, hint))}?" if hint else "")
                )
        if not patterns:
            raise SelectionError(f"name the activations to get, e.g. {available[-2:]}")
        return select(patterns, [], {method.name: available}, owner=method.name).activations[
            method.name
        ]

    def _entry_for(self, method: Method, inputs: dict[str, Any]) -> Entry:
        training = self.module.training
        for entry in method.entries:
            if entry.training is training and entry.key(inputs) in entry.keys:
                return entry
        return self._trace_entry(method, inputs)[0]

    def _run_derived(
        self,
        method: Method,
        entry: Entry,
        graph: torch.fx.Graph,
        inputs: dict[str, Any],
        bended: bool,
        save_as: str | None,
    ) -> Any:
        """Run a graph derived from ``entry`` (kept as method ``save_as`` if given)."""
        placeholders = [str(n.target) for n in graph.nodes if n.op == "placeholder"]
        facts = tuple(f for f in entry.facts if f[0] in placeholders)
        result = TraceResult(graph, entry.result.constants, entry.result.flow_steps, facts, ())
        if save_as is not None:
            if save_as in self._methods or hasattr(type(self), save_as):
                raise TracingError(f"a method named {save_as!r} exists already; pick another name")
            params = [
                inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in placeholders
            ]
            signature = Signature(type(self.module).__name__, save_as, inspect.Signature(params))
            derived = Method(save_as, signature, source=method.key)
            saved = Entry(result, entry.training, placeholders)
            saved.keys.add(saved.key(inputs))
            derived.entries.append(saved)
            derived.current = saved
            self._methods[save_as] = derived
            self._build(derived, saved)
            assert saved.gm is not None
            return saved.gm(**{p: inputs[p] for p in placeholders})
        if bended:
            temp = Method(method.name, method.signature, source=method.key)
            scratch = Entry(result, entry.training, placeholders)
            self._build(temp, scratch)
            gm = scratch.gm
        else:
            gm = build_graph_module(graph, self.module, entry.result.constants, {}, "Unbent")
        assert gm is not None
        return gm(**{p: inputs[p] for p in placeholders})

    def capture(self) -> _Restore:
        """Start every :class:`~torchbend.Capture` bending of this model; ``with`` stops them."""
        captures = [cb for cb in self.callbacks.modules() if isinstance(cb, Capture)]
        if not captures:
            raise BendingError("no Capture is bent into this model: bend tb.Capture() first")
        for cb in captures:
            cb.capture()

        def stop() -> None:
            for cb in captures:
                cb.stop()

        return _Restore(stop)

    # -- controls --------------------------------------------------------------------------------

    @property
    def controllables(self) -> dict[str, BendingParameter]:
        """The named controls of the bendings applied, by name."""
        return {name: control for name, (control, _) in self._controls().items()}

    def _controls(self) -> dict[str, tuple[BendingParameter, list[Bending]]]:
        """Each control with the bendings that read it (cached until bendings change)."""
        if self._control_map is None:
            found: dict[str, tuple[BendingParameter, list[Bending]]] = {}
            for b in self._bendings:
                for control in b.callback.controls():
                    found.setdefault(control.name, (control, []))[1].append(b)
            self._control_map = found
        return self._control_map

    def _check_controls(self, callback: BendingCallback) -> None:
        known = self.controllables
        for control in callback.controls():
            if control.name in known and known[control.name] is not control:
                raise BendingError(
                    f"another control is already named {control.name!r}; reuse that control "
                    f"(bended.controllables[{control.name!r}]) or give this one another name"
                )

    def update(self, name: str, value: float | int | bool) -> None:
        """Set control ``name`` to ``value``; the next call sees it.

        No re-trace and no recompilation: activation callbacks read controls when they run;
        weight bendings that depend on the control are recomputed once, only for the weights
        they bend (crossfaded over ``ramp`` calls if the control has a ramp).
        """
        controls = self._controls()
        if name not in controls:
            hint = closest(name, controls)
            raise BendingError(
                f"no control named {name!r}; known controls: {sorted(controls) or 'none'}"
                + (f" (did you mean {hint[0]!r}?)" if hint else "")
            )
        control, readers = controls[name]
        control.set(value)  # pushes the value into its callbacks, which derive state if needed
        weights: list[str] = []
        for b in readers:
            weights += [w for w in b.weights if w not in weights]
        if control.ramping():
            self._ramping[name] = control
        if weights:
            before = {w: self._weights.current(w) for w in weights}
            self._update_weights(weights)
            if control.ramping():
                after = {w: self._weights.current(w) for w in weights}
                self._fades[name] = (before, after)
                self._fade_weights(control)

    def _fade_weights(self, control: BendingParameter) -> None:
        before, after = self._fades[control.name]
        k = min(control._step + 1, control.ramp) / control.ramp
        mixed: dict[str, torch.Tensor] = dict(self._weights.bent)
        for w in before:
            mixed[w] = torch.lerp(before[w].detach(), after[w].detach(), k)
        self._weights.set(mixed)
        self._install_view()

    def _advance_controls(self) -> None:
        for name, control in list(self._ramping.items()):
            control.advance()
            if name in self._fades:
                if control.ramping():
                    self._fade_weights(control)
                else:
                    _, after = self._fades.pop(name)
                    self._weights.set({**self._weights.bent, **after})
                    self._install_view()
            if not control.ramping():
                del self._ramping[name]

    # -- versions --------------------------------------------------------------------------------

    @property
    def version(self) -> str:
        """Name of the weights version bendings apply to (``"original"`` by default)."""
        return self._active_version

    @property
    def versions(self) -> list[str]:
        """Names of the weights versions: ``"original"`` and those written or imported."""
        return self._weights.names_of_versions()

    def write(self, version: str) -> None:
        """Freeze the current weights (bendings included) into version ``version``."""
        self._weights.write(version)

    def create_version(
        self, version: str, weights: dict[str, torch.Tensor] | nn.Module, strict: bool = True
    ) -> None:
        """Import another checkpoint with the same weight names as version ``version``
        (``strict=False`` keeps the originals for weights it lacks)."""
        state = weights.state_dict() if isinstance(weights, nn.Module) else dict(weights)
        self._weights.import_version(version, state, strict)

    def set_version(self, version: str) -> _Restore:
        """Apply bendings to version ``version``; as a context manager, switch back after."""
        if version not in self.versions:
            raise BendingError(f"no version {version!r}; versions: {self.versions}")
        previous = (self._active_version, dict(self._weights.base))
        self._active_version = version
        base = {} if version == WeightBank.ORIGINAL else self._weights.versions[version]
        self._rebase(base)
        return _Restore(lambda: self._restore_version(*previous))

    def _restore_version(self, version: str, base: dict[str, torch.Tensor]) -> None:
        self._active_version = version
        self._rebase(base)

    def interpolate(self, original: float | None = None, /, **weights: float) -> _Restore:
        """Within ``with``, bend a normalized weighted mix of versions' weights:
        ``with bended.interpolate(1., crazy=1.): ...`` mixes the original weights (the
        positional weight) and version ``crazy`` half and half."""
        if original is not None:
            weights = {WeightBank.ORIGINAL: original, **weights}
        mixed = self._weights.mix(weights)
        previous = (self._active_version, dict(self._weights.base))
        self._rebase(mixed)
        return _Restore(lambda: self._restore_version(*previous))

    def _rebase(self, base: dict[str, torch.Tensor]) -> None:
        self._weights.set_base(base)
        bent = [w for b in self._bendings for w in b.weights]
        self._weights.bent = {}
        self._update_weights(_unique(bent))

    def reset(self) -> None:
        """Remove every bending: outputs are again those of the active version (the wrapped
        module's own by default), bit for bit."""
        self._bendings.clear()
        self._control_map = None
        self._ramping.clear()
        self._fades.clear()
        self.callbacks = nn.ModuleList()
        self._weights.set({})
        for method in self._methods.values():
            for entry in method.entries:
                self._build(method, entry)

    def _bendable(self) -> dict[str, list[str]]:
        return {
            name: _unique(n.name for e in m.entries for n in e.nodes(tensors_only=True))
            for name, m in self._methods.items()
            if m.source is None
        }

    def _attach_bendings(self, method: Method, entry: Entry) -> None:
        for bending in self._bendings:
            self._attach_bending(bending, method, entry)

    def _applies(self, bending: Bending, method: str, node: str) -> bool:
        fns = (
            None
            if bending.fn is None
            else {bending.fn}
            if isinstance(bending.fn, str)
            else set(bending.fn)
        )
        return matches(bending.patterns, method, node, fns)

    def _register(self, bending: Bending, method: str, node: str, value: Any) -> None:
        key = f"{method}:{node}"
        if key not in bending.registered:
            shape, dtype, device = value
            bending.callback.register(key, shape, dtype, device)
            bending.registered.add(key)
        matched = bending.activations.setdefault(method, [])
        if node not in matched:
            matched.append(node)

    def _attach_bending(self, bending: Bending, method: Method, entry: Entry) -> None:
        """Match ``bending``'s patterns on a graph traced before or after it."""
        for node in entry.nodes(tensors_only=True):
            if self._applies(bending, method.key, node.name):
                meta = (node.meta["tb_shape"], node.meta["tb_dtype"], node.meta["tb_device"])
                self._register(bending, method.key, node.name, meta)

    def _bend_traced_value(self, method: str, node: torch.fx.Node, value: Any) -> Any:
        """Bend concrete values while tracing, so decisions are taken on bent activations."""
        if not isinstance(value, torch.Tensor):
            return value
        for bending in self._bendings:
            if self._applies(bending, method, node.name):
                self._register(bending, method, node.name, (value.shape, value.dtype, value.device))
                value = bending.callback(value, f"{method}:{node.name}")
        return value

    def _build(self, method: Method, entry: Entry) -> None:
        slots: dict[str, list[BendingCallback]] = {}
        present = {n.name for n in entry.nodes(tensors_only=True)}
        for bending in self._bendings:
            for name in bending.activations.get(method.key, []):
                if name in present:
                    slots.setdefault(name, []).append(bending.callback)
        modules = {n: ActivationSlot(f"{method.key}:{n}", cbs) for n, cbs in slots.items()}
        entry.gm = build_graph_module(
            entry.graph,
            self._weights.view,
            entry.result.constants,
            modules,
            class_name=f"Bended{type(self.module).__name__}_{method.name}",
        )

    def _update_weights(self, names: Iterable[str]) -> None:
        bent: dict[str, torch.Tensor] = dict(self._weights.bent)
        with torch.no_grad():
            for name in names:
                weight: torch.Tensor = self._weights.base_weight(name).detach()
                for b in self._bendings:
                    if name in b.weights:
                        weight = b.callback.bend_weight(weight, name)
                bent[name] = weight
        self._weights.set(bent)
        self._install_view()

    def _install_view(self) -> None:
        for method in self._methods.values():
            for entry in method.entries:
                if entry.gm is not None:
                    install_view(entry.gm, self._weights.view)

    # -- nn.Module behaviour -----------------------------------------------------------------------

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        super()._apply(fn, recurse)
        bank = self._weights
        bank.versions = {v: {k: fn(t) for k, t in ws.items()} for v, ws in bank.versions.items()}
        bank.set_base({k: fn(v.detach()) for k, v in bank.base.items()})
        bank.set({k: fn(v.detach()) for k, v in bank.bent.items()})
        for method in self._methods.values():
            for entry in method.entries:
                entry.result.constants = {k: fn(v) for k, v in entry.result.constants.items()}
                self._build(method, entry)
        return self

    def train(self, mode: bool = True) -> BendedModule:
        super().train(mode)
        self._weights.refresh()
        self._install_view()
        return self

    def bended_state_dict(self) -> dict[str, torch.Tensor]:
        """The wrapped module's state dict with bent weights in place of the originals."""
        state: dict[str, torch.Tensor] = dict(self.module.state_dict())
        for name, t in self._weights.bent.items():
            state[name] = t.detach()
        return state

    # -- export ------------------------------------------------------------------------------------

    def script(self, methods: Sequence[str] | None = None) -> torch.jit.ScriptModule:
        """A TorchScript module of the bended graphs, callbacks and controls (see
        :func:`torchbend.export.torchscript`)."""
        from .export.torchscript import torchscript

        return torchscript(self, methods=methods)

    # -- inspection --------------------------------------------------------------------------------

    @property
    def weight_names(self) -> list[str]:
        """Dotted names of the wrapped module's parameters."""
        return self._weights.names()

    def weight_shape(self, name: str) -> torch.Size:
        """Shape of weight ``name``."""
        return self._weight(name).shape

    def _weight(self, name: str) -> torch.Tensor:
        if name not in self._weights.names():
            hint = closest(name, self._weights.names())
            raise SelectionError(
                f"{type(self.module).__name__} has no weight {name!r}"
                + (f"; did you mean {' or '.join(map(repr, hint))}?" if hint else "")
            )
        return self._weights.current(name)

    def print_weights(
        self,
        flt: str | Sequence[str] | None = None,
        exclude: str | Sequence[str] | None = None,
        out: str | Path | None = None,
    ) -> Table:
        """Table of weights (current values: bent where bent) with their statistics."""
        return show(weights_table(self._weights, flt, exclude), out)

    def _traced(self, fn: str) -> Entry:
        method = self._methods.get(fn)
        if method is None or method.current is None:
            raise TracingError(
                f"method {fn!r} of {type(self.module).__name__} is not traced (traced: "
                f"{self.traced_methods or 'none'}); call bended.trace({fn!r}, <inputs>) first."
            )
        return method.current

    def activations(
        self,
        fn: str = "forward",
        op: str | Sequence[str] | None = None,
        flt: str | Sequence[str] | None = None,
        exclude: str | Sequence[str] | None = None,
    ) -> list[ActivationInfo]:
        """Activations of the last graph traced for ``fn`` (tensor-valued nodes)."""
        return activation_infos(self._traced(fn), op, flt, exclude)

    def activation_names(self, fn: str = "forward") -> list[str]:
        """Names of the activations of ``fn`` (what ``bend`` patterns match)."""
        return [a.name for a in self.activations(fn)]

    def activation_shape(self, name: str, fn: str = "forward") -> Any:
        """Shape of activation ``name`` of ``fn``, as traced."""
        for a in self.activations(fn):
            if a.name == name:
                return a.shape
        hint = closest(name, self.activation_names(fn))
        raise SelectionError(
            f"{fn} of {type(self.module).__name__} has no activation {name!r}"
            + (f"; did you mean {' or '.join(map(repr, hint))}?" if hint else "")
        )

    def print_activations(
        self,
        fn: str = "forward",
        op: str | Sequence[str] | None = None,
        flt: str | Sequence[str] | None = None,
        exclude: str | Sequence[str] | None = None,
        out: str | Path | None = None,
    ) -> Table:
        """Table of the activations of ``fn``: name, op, shape, dtype."""
        return show(activations_table(self.activations(fn, op, flt, exclude)), out)

    def graph(self, fn: str = "forward") -> torch.fx.Graph:
        """The last graph traced for ``fn`` (unbent; ``graph.flow_steps`` lists decisions)."""
        return self._traced(fn).graph

    def graph_module(self, fn: str = "forward") -> torch.fx.GraphModule:
        """The bended GraphModule that runs for ``fn`` on inputs like the last traced ones."""
        gm = self._traced(fn).gm
        assert gm is not None
        return gm

    def flow_steps(self, fn: str = "forward") -> list[FlowStep]:
        """The decisions baked into the last graph traced for ``fn``."""
        return list(self._traced(fn).result.flow_steps)

    def print_graph(self, fn: str = "forward", out: str | Path | None = None) -> str:
        """Print the bended graph of ``fn``: the traced graph with its bending slots."""
        entry = self._traced(fn)
        assert entry.gm is not None
        bent = [n.args[0].name for n in entry.gm.graph.nodes if n.meta.get("tb_slot")]
        text = str(bent_graph(entry.graph, dict.fromkeys(bent)))
        if out is None:
            print(text)
        else:
            Path(out).write_text(text + "\n")
        return text


class _Restore:
    """Returned by switches that apply at once and, used with ``with``, undo on exit."""

    def __init__(self, undo: Callable[[], None]) -> None:
        self._undo = undo

    def __enter__(self) -> _Restore:
        return self

    def __exit__(self, *exc: object) -> None:
        self._undo()


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _step(step: FlowStep) -> str:
    return f"{step.kind} '{step.name}' = {step.value!r} at {step.file} ({step.function})"
