"""The engine: the parts of a bended module built with their collaborators, and the operations
that change them (tracing, calling, bending as one transaction, versions, device moves)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..callbacks.base import BendingCallback
from ..callbacks.bend_options import Guard, options
from ..callbacks.rewire import Rewire
from ..config import BendingConfig
from ..errors import BendingError, SelectionError, TracingError
from ..tracing import TracedGraph
from ..tracing.backends import Backend
from ..tracing.backends.named import make_backend
from .activations import from_activations, get_activations, to_tensordict
from .bendargs import check_callback, rewire_sources
from .bendings import BendingSet
from .board import ControlBoard
from .inspector import Inspector
from .methods import MethodTable
from .readonly import BendedView, Restore
from .selection import Aliases, Selection, select
from .shaping import shaping
from .tables import Table, activations_table, latent_names, show
from .weights import WeightBank, weight_holder

__all__ = ["Engine"]

Fns = str | tuple[str, ...] | None
"""Methods unscoped patterns apply to: one, several, or all (``None``)."""


class Engine:
    """The bending engine of one wrapped module: its parts, each given its collaborators when
    it is built, and what changes them.

    The parts are built once, here, in the order their needs allow: the bending set (given the
    sample rate), the weight bank (given the bending set, to bend weights, and told to point
    the method table's graphs at each new bent module), the method table (given the bending
    set, for what it does with new graphs, and the weight bank, for the module graphs read),
    the control board and the inspector. No part changes another's attributes: each calls
    the others through the small protocols of :mod:`torchbend.engine.protocols`.

    Args:
        module: the wrapped module.
        leaves, strict, max_graphs, check, backend: see :class:`~torchbend.BendedModule`.
        reserved: names a method saved with ``save_as`` cannot take (the facade's own).
    """

    def __init__(
        self,
        module: nn.Module,
        leaves: Iterable[type | str] = (),
        strict: bool = False,
        max_graphs: int = 16,
        check: bool = True,
        backend: Backend | str = "auto",
        reserved: Collection[str] = (),
    ) -> None:
        if not isinstance(module, nn.Module):
            raise TracingError(
                f"BendedModule wraps an nn.Module, got {type(module).__name__}; wrap plain "
                "functions in an nn.Module whose forward calls them."
            )
        self.module = module
        self.leaves: tuple[type | str, ...] = tuple(leaves)
        self.aliases = Aliases()
        self.guard: Guard | None = None
        """The guard of every bending that gives none (see :meth:`set_guard`)."""
        self.given_rate: float | None = None
        """The sample rate set on the bended module, if any (see :meth:`sample_rate`)."""
        self.bendings = BendingSet(type(module).__name__, self.sample_rate)
        self.weights = WeightBank(weight_holder(module), self.bendings, self._new_bent_module)
        self.table = MethodTable(
            module,
            self.backend_named(backend),
            self.bendings,
            self.weights,
            strict,
            max_graphs,
            check,
            reserved,
        )
        self.board = ControlBoard(self.bendings, self.weights)
        self.inspector = Inspector(self.table, self.weights)

    def _new_bent_module(self, module: nn.Module) -> None:
        """The weight bank made a new bent module: the compiled graphs read it from now on."""
        self.table.install_module(module)

    def backend_named(self, spec: Backend | str) -> Backend:
        """The backend ``spec`` names, for this module (see :func:`make_backend`)."""
        return make_backend(spec, leaves=self.leaves, module=self.module)

    def view(self) -> BendedView:
        """A read-only view of the traced methods, bendings, controls and weights."""
        return BendedView(self.module, self.table, self.bendings, self.board, self.weights)

    def sample_rate(self) -> float | None:
        """The rate set (:attr:`given_rate`), or the wrapped model's ``sample_rate`` (or
        ``sr``) attribute; ``None`` if neither."""
        if self.given_rate is not None:
            return self.given_rate
        for attribute in ("sample_rate", "sr"):
            value = getattr(self.module, attribute, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return float(value)
        return None

    def set_sample_rate(self, rate: float | None) -> None:
        """Set the sample rate (``None``: read it from the model again)."""
        if rate is not None and (
            isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0
        ):
            raise BendingError(f"sample_rate is a number of Hz > 0 (or None), got {rate!r}")
        self.given_rate = None if rate is None else float(rate)

    def copy_refused(self) -> BendingError:
        """The error for copying or pickling the bended module."""
        # Graphs, bent modules and slots point at the wrapped module's tensors and at each
        # other: a copy made attribute by attribute would run on a mix of two modules' weights.
        return BendingError(
            f"a BendedModule of {type(self.module).__name__} cannot be copied or pickled; "
            "wrap a copy of the model and bend it the same way: "
            "tb.BendedModule(copy.deepcopy(model)).bend(bended.bending_config()) after "
            "tracing it, or save the bending with bended.bending_config().save(path)"
        )

    # -- tracing and calling ------------------------------------------------------------------

    def trace(
        self, fn: str, inputs: dict[str, Any], args: Sequence[Any] = ()
    ) -> tuple[TracedGraph, Any]:
        """Trace ``fn`` on ``args`` and ``inputs``, with the backend ``_backend`` (or
        ``backend``, when ``fn`` takes no argument of that name) names if given; the graph
        and its outputs."""
        backend = inputs.pop("_backend", None)
        if backend is None and "backend" not in self.table.method(fn).signature.names:
            backend = inputs.pop("backend", None)
        override = None if backend is None else self.backend_named(backend)
        entry, result = self.table.trace(fn, inputs, override, args)
        return entry.graph, result.outputs

    def call(self, fn: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Run ``fn`` (see :meth:`BendedModule.call`), then move the ramps on."""
        traced = self.table.get(fn) is not None
        out = self.table.call(fn, args, kwargs)
        if not traced:
            # An untraced method runs on the bent module: what it set on the copies of bent
            # modules (set_streaming's flags) must outlive them, as on the shared ones.
            self.weights.give_back()
        if self.board.ramping:
            self.board.advance()
        return out

    # -- bending --------------------------------------------------------------------------------

    def bend(
        self,
        callback: BendingCallback,
        patterns: Sequence[str],
        fn: str | Sequence[str] | None = None,
        **raw: Any,
    ) -> list[str]:
        """Bend the targets of ``patterns`` with ``callback`` and the options ``raw`` (see
        :meth:`BendedModule.bend`), all or nothing: a bending that fails half-way leaves the
        module as it was."""
        check_callback(callback, patterns, self.weights.names())
        given = options(**raw)
        fns = fn if fn is None or isinstance(fn, str) else tuple(fn)
        expanded = self.aliases.expand(patterns)
        selection = self.selection(expanded, fns)
        applied: BendingCallback = callback
        if isinstance(callback, Rewire):
            if given:
                raise BendingError(f"Rewire takes no {', '.join(given)}: its amount is the mix")
            expanded += rewire_sources(callback, selection, self.table.entries())
            selection = self.selection(expanded, fns)
        else:
            applied = shaping(callback, given, self.guard)
        self.board.check(applied)
        originals = {w: self.weights.original(w) for w in selection.weights}
        bending = self.bendings.add(
            applied, patterns, fns, selection, originals, expanded, given, callback
        )
        bent = dict(self.weights.bent)
        try:
            for method, entry in self.table.entries():
                self.bendings.attach_one(bending, method, entry)
            device = next((t.device for t in self.module.parameters()), None)
            if device is not None and any(b.device != device for b in applied.buffers()):
                applied.to(device)  # bent after the model moved: its state follows it
            if bending.weights:
                self.weights.rebend(bending.weights)
            self.table.rebuild(list(bending.activations))
        except BaseException:  # all or nothing: the module is left as it was
            self.bendings.remove(bending)
            self.weights.set(bent)
            self.table.rebuild(list(bending.activations))
            raise
        self.bendings.warnings_for(bending, self.table.entries(), self.table.flips)
        return selection.keys()

    def bend_given(
        self,
        callback: BendingCallback | BendingConfig,
        patterns: Sequence[str],
        fn: str | Sequence[str] | None,
        given: dict[str, Any],
    ) -> list[str]:
        """What ``bend(callback, *patterns, fn=fn, **given)`` asks: :meth:`bend`, or for a
        :class:`BendingConfig` (which takes no patterns or options) :meth:`bend_config`."""
        if not isinstance(callback, BendingConfig):
            return self.bend(callback, patterns, fn, **given)
        if patterns or any(o is not None for o in given.values()):
            raise SelectionError("bend(config) takes no patterns or options: the config holds them")
        return self.bend_config(callback)

    def bend_config(self, config: BendingConfig) -> list[str]:
        """Mark the aliases of ``config`` and apply its bendings in order; the keys bent."""
        for alias, target in config.aliases.items():
            self.mark(alias, target)
        keys: list[str] = []
        for item in config:
            bent = self.bend(item.callback, item.patterns, item.fn, **item.options)
            keys += [k for k in bent if k not in keys]
        return keys

    def selection(self, patterns: Sequence[str], fn: Fns) -> Selection:
        """The targets of ``patterns``, their aliases replaced already."""
        owner = type(self.module).__name__
        bendable = self.table.bendable()
        try:
            return select(patterns, self.weights.names(), bendable, fn, owner=owner)
        except SelectionError as e:
            raise SelectionError(f"{e}{self.inspector.why_not_bendable(patterns)}") from None

    def select(self, patterns: Sequence[str], fn: str | Sequence[str] | None) -> list[str]:
        """The keys :meth:`bend` would bend for ``patterns``."""
        fns = fn if fn is None or isinstance(fn, str) else tuple(fn)
        return self.selection(self.aliases.expand(patterns), fns).keys()

    def set_guard(self, guard: bool | Guard | None) -> None:
        """Make ``guard`` (``True``: a default :class:`Guard`; ``False``: none) the guard of the
        bendings that give none, applying them again."""
        if guard is True:
            guard = Guard()
        if guard is False:
            guard = None
        if guard is not None and not isinstance(guard, Guard):
            raise BendingError(f"guard is True, False, None or a tb.Guard, got {guard!r}")
        config = self.bending_config()
        before, self.guard = self.guard, guard
        if before == guard or not len(config):
            return
        self.reset()
        self.bend_config(config)

    def mark(self, alias: str, target: str) -> None:
        """Name ``target`` ``alias`` (see :meth:`BendedModule.mark`)."""
        keys = [*self.weights.names()]
        for method, nodes in self.table.bendable().items():
            keys += [f"{method}:{n}" for n in nodes]
        if isinstance(target, str) and ":" not in target and target not in keys:
            target = f"forward:{target}"
        used = [p for b in self.bendings for p in b.patterns]
        self.aliases.mark(alias, target, keys, used)

    def bending_config(self) -> BendingConfig:
        """The bendings applied and the aliases, as a :class:`BendingConfig`."""
        config = self.bendings.config()
        config.aliases = dict(self.aliases.targets)
        return config

    def reset(self) -> None:
        """Remove every bending: outputs are the active version's again, bit for bit."""
        self.bendings.clear()
        self.board.clear()
        # The active version's own weights (a mix left by interpolate() without `with` too).
        self.weights.set_base(self.weights.base_of(self.weights.active))
        self.weights.set({})
        self.table.rebuild()

    def capture(self) -> Restore:
        """Start every Capture bending; ``with`` stops them."""
        return Restore(self.bendings.capture())

    # -- activations and controls ---------------------------------------------------------------

    def get_activations(
        self,
        patterns: Sequence[str],
        fn: str,
        inputs: dict[str, Any],
        bended: bool,
        as_tensordict: bool,
        save_as: str | None,
    ) -> Any:
        """See :meth:`BendedModule.get_activations`."""
        expanded = self.aliases.expand(patterns)
        values = get_activations(self.table, expanded, fn, inputs, bended, save_as)
        return to_tensordict(values) if as_tensordict else values

    def from_activations(
        self,
        names: Sequence[str],
        fn: str,
        values: dict[str, Any],
        bended: bool,
        save_as: str | None,
    ) -> Any:
        """See :meth:`BendedModule.from_activations`."""
        return from_activations(self.table, names, fn, values, bended, save_as)

    def print_controls(self, out: str | Path | None) -> Table:
        return show(self.board.table(), out)

    def print_weights(self, flt: Any, exclude: Any, out: str | Path | None) -> Table:
        aliases = {w: self.aliases.of(w) for w in self.weights.names()}
        return self.inspector.print_weights(flt, exclude, out, aliases)

    def print_activations(
        self, fn: str, op: Any, flt: Any, exclude: Any, out: str | Path | None
    ) -> Table:
        infos = self.inspector.activations(fn, op, flt, exclude)
        key = self.table.method(fn).key
        aliases = {a.name: self.aliases.of(f"{key}:{a.name}") for a in infos}
        return show(activations_table(infos, aliases, latent_names(self.module)), out)

    # -- versions and moves ---------------------------------------------------------------------

    def set_version(self, version: str) -> Restore:
        """Apply bendings to ``version``; ``with`` switches back after."""
        return Restore(self.weights.rebase(version, self.weights.base_of(version)))

    def import_version(
        self, version: str, weights: dict[str, torch.Tensor] | nn.Module, strict: bool
    ) -> None:
        """Keep the weights of another checkpoint (or module) as ``version``."""
        state = weights.state_dict() if isinstance(weights, nn.Module) else dict(weights)
        self.weights.import_version(version, state, strict)

    def interpolate(self, original: float | None, weights: dict[str, float]) -> Restore:
        """Bend a normalized weighted mix of versions' weights (``original``: the weight of
        the original version, if given); ``with`` switches back after."""
        if original is not None:
            weights = {WeightBank.ORIGINAL: original, **weights}
        return Restore(self.weights.rebase(self.weights.active, self.weights.mix(weights)))

    def apply(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Follow a device or dtype move of the wrapped module (``fn``, already applied to it)."""
        self.weights.apply(fn)
        self.table.map_constants(fn)
        self.table.rebuild()

    def bended_state_dict(self) -> dict[str, torch.Tensor]:
        """The wrapped module's state dict with bent weights in place of the originals."""
        state: dict[str, torch.Tensor] = dict(self.module.state_dict())
        state.update({name: t.detach() for name, t in self.weights.bent.items()})
        return state
