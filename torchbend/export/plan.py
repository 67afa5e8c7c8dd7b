"""Planning an export: what to export and whether it can be, checked before anything is built."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ..callbacks.argument import Argument, declared
from ..callbacks.base import BendingCallback, Chain
from ..callbacks.seeded import Seeded
from ..controls import BendingParameter, Control, TensorParameter, control_of
from ..engine.selfcheck import kept_buffers
from ..errors import ExportError
from .arguments import ExportedArgument, method_arguments

if TYPE_CHECKING:
    from ..bended import BendedModule
    from ..engine.dispatch import Entry

__all__ = [
    "ExportPlan",
    "PlannedControl",
    "PlannedTensorWrite",
    "PlannedWeight",
    "PlannedWrite",
    "from_silence",
    "leaves",
    "start_from_silence",
]


@dataclass(frozen=True)
class PlannedWrite:
    """An argument that a control's setter assigns in an exported module."""

    callback: int
    """The index of the exported callback."""
    path: str
    """Where the callback whose argument it is sits in it: ``""`` (itself), ``"callback"``
    (the one a :class:`~torchbend.engine.shaping.Shaped` holds)."""
    argument: Argument
    """The argument, as declared."""
    source: Control
    """What drives it: the control, or a view of it."""


@dataclass(frozen=True)
class PlannedTensorWrite:
    """A vector that a tensor control's setter copies in an exported module (with the
    callback's scriptable ``set_<name>``)."""

    callback: int
    """The index of the exported callback."""
    path: str
    """Where the callback that holds the vector sits in it (as :attr:`PlannedWrite.path`)."""
    name: str
    """The callback's argument the control is given as (``"vector"``)."""


@dataclass
class PlannedControl:
    """A control of the export, and what a change of it must reach."""

    control: BendingParameter
    writes: list[PlannedWrite] = field(default_factory=list)
    """The arguments to assign on set."""
    tensor_writes: list[PlannedTensorWrite] = field(default_factory=list)
    """For a tensor control, the vectors to copy it into on set."""
    weights: list[int] = field(default_factory=list)
    """Indices of the weights bent again on set."""


@dataclass
class PlannedWeight:
    """A weight bent again when a control changes, by these callbacks (indices), in order."""

    name: str
    callbacks: list[int]


def leaves(cb: BendingCallback) -> list[BendingCallback]:
    if isinstance(cb, Chain):
        return [leaf for inner in cb.chained() for leaf in leaves(inner)]
    return [cb]


class ExportPlan:
    """Everything an export needs, checked before anything is scripted.

    Raises :class:`ExportError` for a method that is not traced, a callback that cannot be
    scripted, or a control that a scripted callback cannot follow.
    """

    def __init__(self, bended: BendedModule, methods: Sequence[str] | None = None) -> None:
        self.bended = bended.view()
        owner = self.bended.owner
        traced = self.bended.traced()
        names = list(traced if methods is None else methods)
        if isinstance(methods, str):
            names = [methods]
        missing = [n for n in names if n not in traced]
        if missing or not names:
            raise ExportError(
                f"cannot export {', '.join(map(repr, missing)) or 'nothing'} of {owner}: "
                f"exported methods must be traced first (traced: {traced or 'none'}); call "
                f"bended.trace({(missing or ['forward'])[0]!r}, <example inputs>)."
            )
        self.methods = names
        self.latency: dict[str, int] | None = None
        """For an nn~ file, the delays it adds: ``model``, ``fifo_block``, ``smallest_buffer``
        (samples), written into its metadata."""
        keys = {self.bended.key(n) for n in names}
        bendings = [b for b in self.bended.bendings if b.weights or keys & set(b.activations)]
        dependent = _unique(w for b in bendings if b.callback.controls() for w in b.weights)
        # A weight bent without controls is exported bent (a constant): the callbacks of
        # bendings of such weights only are neither scripted nor saved.
        scripted = [
            b for b in bendings if keys & set(b.activations) or set(b.weights) & set(dependent)
        ]
        self._check_scriptable(scripted)
        # The methods run only once what cannot be exported is refused: a run may record.
        self.entries: dict[str, Entry] = {}
        """Per method, the graph exported: the one the bended module runs now on the inputs
        it was last traced with (a bending may have flipped a decision on tensor values)."""
        self.expected: dict[str, tuple[dict[str, Any], Any]] = {}
        """Per method, those inputs and what the bended module gives for them without
        autograd: what the export must give (:func:`torchbend.export.verify.check_export`)."""
        for n in names:
            example = self.bended.example(n)
            if example is None:
                entry = self.bended.current(n)
            else:
                # From the state the export starts from (see :func:`start_from_silence`).
                with from_silence(self.bended.weights_view):
                    entry, output = self.bended.running(n, example)
                self.expected[n] = (example, output)
            assert entry.gm is not None
            self.entries[n] = entry
        self.arguments: dict[str, list[ExportedArgument]] = {
            n: method_arguments(self.bended, n, self.entries[n]) for n in names
        }
        """Per method, its arguments as exported (types, defaults, traced values)."""
        self.leaves: list[BendingCallback] = []
        """The callbacks the export scripts, each once."""
        for b in scripted:
            for leaf in leaves(b.callback):
                if all(leaf is not other for other in self.leaves):
                    self.leaves.append(leaf)
        self.controls = {
            name: self._plan_control(name, control)
            for name, control in self.bended.controllables.items()
        }
        self.weights: list[PlannedWeight] = []
        for w in dependent:
            chain = [
                self.index(leaf) for b in bendings if w in b.weights for leaf in leaves(b.callback)
            ]
            self.weights.append(PlannedWeight(w, chain))
            k = len(self.weights) - 1
            for c in self.controls.values():
                readers = [b for b in bendings if c.control in b.callback.controls()]
                if any(w in b.weights for b in readers):
                    c.weights.append(k)

    def check_savable(self) -> None:
        """Raise :class:`ExportError` if a callback the export scripts (or one it holds) keeps
        state ``torch.jit.save`` cannot write."""
        for leaf in self.leaves:
            for cb in leaf.modules():
                for attr, value in vars(cb).items():
                    if isinstance(value, torch.Generator):
                        raise ExportError(
                            f"{cb!r} keeps a torch.Generator ({attr}), which torch.jit.save "
                            "cannot write; give it seed=None (torch's global generator) to "
                            "export it to a file, or keep the scripted module in memory "
                            "(path=None)"
                        )

    def index(self, leaf: BendingCallback) -> int:
        """The position of ``leaf`` among the exported callbacks."""
        return next(i for i, other in enumerate(self.leaves) if other is leaf)

    def _check_scriptable(self, bendings: Sequence[Any]) -> None:
        problems = []
        for b in bendings:
            for leaf in leaves(b.callback):
                if not leaf.scriptable:
                    targets = b.weights + [
                        f"{m}:{n}" for m, ns in b.activations.items() for n in ns
                    ]
                    problems.append(
                        f"{leaf!r} (bending {', '.join(targets) or 'nothing'}) is marked "
                        "scriptable = False: it runs Python code (a function, or records values "
                        "in Python objects) that TorchScript cannot compile"
                    )
        if problems:
            raise ExportError(
                f"cannot script the bendings of {self.bended.owner}: "
                + "; ".join(problems)
                + ". Remove these bendings (or export before bending with them)."
            )

    def _plan_control(self, name: str, control: BendingParameter) -> PlannedControl:
        plan = PlannedControl(control)
        for i, leaf in enumerate(self.leaves):
            if control not in leaf.controls():
                continue
            writes = []
            for path, cb in leaf.named_modules():
                if not isinstance(cb, BendingCallback):
                    continue
                found = {a: v for a, v in cb.controlled().items() if control_of(v) is control}
                if isinstance(control, TensorParameter):
                    for a in found:
                        if not callable(getattr(type(cb), f"set_{a}", None)):
                            raise ExportError(
                                f"tensor control {name!r} drives {a} of {cb!r}, which has no "
                                f"scriptable set_{a}(value) for an exported module to call"
                            )
                    plan.tensor_writes += [PlannedTensorWrite(i, path, a) for a in found]
                    continue
                arguments = declared(type(cb))
                _check_derives(name, cb, [a for a in found if arguments[a].derives])
                writes += [PlannedWrite(i, path, arguments[a], v) for a, v in found.items()]
            if not writes and not plan.tensor_writes:
                raise ExportError(
                    f"control {name!r} is read by {leaf!r} other than through one of its "
                    "numeric arguments; the scripted module could not follow it"
                )
            plan.writes += writes
        return plan


def start_from_silence(module: torch.nn.Module) -> None:
    """Clear the state ``module`` keeps between calls (its ``reset_cache()``, if it has
    one): an export starts from silence, as a host's first buffer does, whatever state
    tracing or calling the model left in its caches."""
    reset_cache = getattr(module, "reset_cache", None)
    if callable(reset_cache):
        reset_cache()


@contextlib.contextmanager
def from_silence(module: torch.nn.Module) -> Iterator[None]:
    """Run a block from the state an export starts from (:func:`start_from_silence`), then
    put back ``module``'s buffers (the tensors, replaced or not, and their values) and plain
    attributes: the user's model keeps the state its own calls left."""
    if not callable(getattr(module, "reset_cache", None)):
        yield
        return
    attributes = [(m, dict(vars(m))) for m in module.modules()]
    with kept_buffers(module):
        try:
            start_from_silence(module)
            yield
        finally:
            for m, before in attributes:
                for key in [k for k in vars(m) if k not in before]:
                    del vars(m)[key]
                vars(m).update(before)


def _check_derives(name: str, cb: BendingCallback, derived: list[str]) -> None:
    """Refuse control ``name`` on the arguments ``derived`` of ``cb`` (declared with
    ``derives=True``) if an exported module could not derive ``cb``'s state again when it is
    set: only :class:`Seeded` callbacks do it scripted (``control_changed``), and draw anew
    for a new seed if they :meth:`~Seeded.draw` in TorchScript."""
    if not derived:
        return
    what = f"control {name!r} drives {', '.join(derived)} of {cb!r}"
    if not isinstance(cb, Seeded):
        raise ExportError(
            f"{what}, which derives its state again when that changes, in Python only: "
            "exported modules derive again the state of Seeded callbacks "
            f"(torchbend.callbacks.seeded). Give {type(cb).__name__} a number instead of the "
            "control to export it."
        )
    if "seed" in derived and type(cb).draw is Seeded.draw and type(cb).redraw is Seeded.redraw:
        raise ExportError(
            f"{what}, which draws in register_target, in Python only: override Seeded.draw "
            f"with scriptable code for an exported module to draw anew, or give "
            f"{type(cb).__name__} a seed instead of the control to export it."
        )


def _unique(names: Any) -> list[str]:
    return list(dict.fromkeys(names))
