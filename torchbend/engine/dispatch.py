"""Graph cache of traced methods: argument binding, per-input graphs and their guards."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from ..errors import TracingError, did_you_mean
from ..tracing import TracedGraph, fact_reader, is_guard, kind_of, record_of
from ..tracing.binding import extra_index, extra_name, is_input_name
from ..tracing.facts import describe_fact
from .folding import FoldedGraph

__all__ = ["Entry", "Method", "Signature", "signature_of"]


class Signature:
    """Binds call arguments of a method to its input names, quickly.

    Inputs are named as :mod:`torchbend.tracing.binding` says: a parameter by its name, the
    positional extras of ``*args`` by the parameter's name and their position (``args_0``),
    what ``**kwargs`` takes by the name it was given. The ``*args`` parameter's name given
    by keyword takes the positional extras as a tuple (``args=(y, z)``), for the callers
    that give inputs by name only (``trace``, exports, ``get_activations``).
    """

    def __init__(self, owner: str, method: str, fn: Callable[..., Any] | inspect.Signature) -> None:
        sig = fn if isinstance(fn, inspect.Signature) else inspect.signature(fn)
        self.text = f"{owner}.{method}{sig}"
        params = list(sig.parameters.values())
        self.star = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
        """The name of the ``*args`` parameter, if any."""
        self.keywords = any(p.kind is p.VAR_KEYWORD for p in params)
        """Whether the method takes ``**kwargs``."""
        self.positional = [
            p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        self.names = [p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        """The names of the parameters, ``*args`` and ``**kwargs`` left out."""
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        self.known = frozenset(self.names)
        self.plain = self.star is None and not self.keywords
        self.first = (
            self.names[0] if self.names else None if self.star is None else extra_name(self.star, 0)
        )
        """The name of the first input (what a signal is fed to), or ``None`` if none."""

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        if not kwargs and len(args) == len(self.names) == len(self.positional):
            return dict(zip(self.names, args))
        extras: Sequence[Any] = ()
        if len(args) > len(self.positional):
            if self.star is None:
                raise TracingError(
                    f"{self.text} takes {len(self.positional)} positional argument(s), "
                    f"got {len(args)}"
                )
            args, extras = args[: len(self.positional)], args[len(self.positional) :]
        inputs = dict(zip(self.positional, args))
        others: dict[str, Any] = {}
        numbered: dict[int, Any] = {}
        for k, v in kwargs.items():
            if k == self.star:
                extras = self._extras(v, extras)
            elif k in self.known:
                if k in inputs:
                    raise TracingError(f"{self.text} got argument {k!r} twice")
                inputs[k] = v
            elif (index := extra_index(self.star, k)) is not None:  # as bound: args_0...
                numbered[index] = v
            elif self.keywords and is_input_name(k):
                others[k] = v
            elif self.keywords:
                raise TracingError(
                    f"{self.text} takes {k!r} through **kwargs: inputs of a traced method are "
                    "named by Python identifiers (their graph's placeholders)"
                )
            else:
                raise TracingError(
                    f"{self.text} has no argument {k!r}" + did_you_mean(k, self.names)
                )
        if numbered:
            extras = self._extras(self._numbered(numbered), extras)
        if len(inputs) < len(self.names):
            for name in self.names:
                if name not in inputs:
                    if name not in self.defaults:
                        raise TracingError(f"{self.text} is missing argument {name!r}")
                    inputs[name] = self.defaults[name]
        if self.plain:
            return inputs
        return self._flat(inputs, extras, others)

    def order(self, inputs: dict[str, Any]) -> list[str]:
        """The names of bound ``inputs`` in the order of the signature (their graph's)."""
        return self.names if self.plain else list(inputs)

    def _numbered(self, numbered: dict[int, Any]) -> list[Any]:
        """The positional extras given by their names (``args_0``, ``args_1``...)."""
        if sorted(numbered) != list(range(len(numbered))):
            given = ", ".join(extra_name(str(self.star), i) for i in sorted(numbered))
            raise TracingError(
                f"{self.text} got {given}: the positional extras of *{self.star}, named, are "
                f"numbered from 0 without a gap"
            )
        return [numbered[i] for i in range(len(numbered))]

    def _extras(self, value: Any, given: Sequence[Any]) -> Sequence[Any]:
        """The positional extras given by the ``*args`` parameter's name."""
        if given:
            raise TracingError(f"{self.text} got *{self.star} both by position and by name")
        if not isinstance(value, (tuple, list)):
            raise TracingError(
                f"{self.text}: {self.star}= takes the positional extras of *{self.star} as a "
                f"tuple, e.g. {self.star}=(y,), got {type(value).__name__}"
            )
        return value

    def _flat(
        self, inputs: dict[str, Any], extras: Sequence[Any], others: dict[str, Any]
    ) -> dict[str, Any]:
        """``inputs`` in the order of the signature, the extras in their places."""
        flat = {n: inputs[n] for n in self.positional}
        if self.star is not None:
            for i, value in enumerate(extras):
                flat[extra_name(self.star, i)] = value
        for name in self.names:
            flat.setdefault(name, inputs[name])
        flat.update(others)
        return flat


class Entry:
    """One traced graph of one method, and the inputs it is valid for."""

    def __init__(self, result: TracedGraph, training: bool, names: Sequence[str]) -> None:
        self.result = result
        self.graph = result
        self.training = training
        self.facts = result.guard_facts
        self.readers = tuple(fact_reader(f) for f in result.guard_facts)
        self.names = tuple(names)
        """The names of the inputs it was traced with (see :class:`Signature`)."""
        self.keys: set[tuple[Any, ...]] = set()
        self.input_names = tuple(str(n.target) for n in result.nodes if n.op == "placeholder")
        assert set(self.input_names) <= set(names)
        self.shapes: dict[str, set[tuple[int, ...]]] = {}
        """The shapes each tensor activation had in the traces this graph serves (one per
        set of sizes of the inputs that gave this same graph)."""
        self.remember(result)
        self.gm: torch.fx.GraphModule | None = None
        self.folded: FoldedGraph | None = None
        """``gm`` with its static channel bendings folded into weights, if any fold."""
        self.backend = "concrete"
        """Name of the tracing backend that traced the graph."""
        self.example: dict[str, Any] | None = None
        """The inputs the graph was first traced (or saved) with, by name (the caller's
        tensors, not copies: long inputs are not kept twice; runs take copies of them)."""

    def remember(self, result: TracedGraph) -> None:
        """Keep the activation shapes of a trace that gave this graph."""
        for node in result.nodes:
            record = record_of(node)
            if record.is_tensor and record.shape is not None:
                self.shapes.setdefault(node.name, set()).add(tuple(record.shape))

    def key(self, inputs: dict[str, Any]) -> tuple[Any, ...]:
        """The guard key of ``inputs``: the kinds of all arguments (``None`` or a tensor, an
        ``int`` or a ``float``...) and their number (``*args`` and ``**kwargs`` may take
        more), the plain attributes of the modules the trace ran through (``training``,
        flags), the grad mode if the trace read it, then the facts the graph's decisions
        read."""
        kinds = (*(kind_of(inputs.get(n, _ABSENT)) for n in self.names), len(inputs))
        if kinds[-1] != len(self.names) or _Absent in kinds:  # other inputs: no graph of these
            return (kinds, None, False)
        state = tuple(s.current() for s in self.result.module_state)
        if self.result.grad_mode is not None:
            state += (torch.is_grad_enabled(),)
        accepts = self.result.accepts
        held = True if accepts is None else accepts(inputs)
        return (kinds, state, held, *(read(inputs) for read in self.readers))

    def mismatch(self, inputs: dict[str, Any]) -> str | None:
        """What of ``inputs`` differs from every set of inputs this graph was traced or kept
        for (an argument's kind, a module attribute, the grad mode, a fact), for messages;
        ``None`` if the inputs fit."""
        key = self.key(inputs)
        if not self.keys or key in self.keys:
            return None
        known = next(iter(self.keys))
        kinds, state, held, *facts = key
        for name, now, then in zip(self.names, kinds, known[0]):
            if now != then:
                return f"argument {name!r} is {_kind_name(now)}, traced as {_kind_name(then)}"
        if kinds[-1] != known[0][-1]:
            extra = ", ".join(repr(n) for n in inputs if n not in self.names)
            return f"the call gives inputs the trace was not given ({extra})"
        if state != known[1]:
            return "an attribute of a module the trace ran (training, a flag) or the grad mode"
        if not held:
            return "a size outside the ranges torch.export traced the graph for"
        for fact, now, then in zip(self.facts, facts, known[3:]):
            if now != then:
                return f"{describe_fact(fact)} is {now!r}, traced as {then!r}"
        return None

    def same_decisions(self, result: TracedGraph, training: bool) -> bool:
        return (
            training is self.training
            and result.guard_facts == self.facts
            and [(s.kind, s.name, s.value) for s in result.flow_steps]
            == [(s.kind, s.name, s.value) for s in self.result.flow_steps]
            and result.python_code("self").src == self.graph.python_code("self").src
            and _same_constants(result.constants, self.result.constants)
        )

    def nodes(self, tensors_only: bool) -> list[torch.fx.Node]:
        return [
            n
            for n in self.graph.nodes
            if n.op != "output"
            and not is_guard(n)
            and (record_of(n).is_tensor if tensors_only else record_of(n).shape is not None)
        ]


class Method:
    """The traced graphs of one method."""

    def __init__(self, name: str, signature: Signature, source: str | None = None) -> None:
        self.name = name
        self.signature = signature
        self.entries: list[Entry] = []
        self.current: Entry | None = None
        self.example: dict[str, Any] | None = None
        """The inputs ``current`` was last traced (or saved) with, by name: what exports are
        checked on."""
        self.source = source
        """For a method derived from another (``save_as``): the method whose bendings apply."""

    @property
    def key(self) -> str:
        """The name bending keys use for this method's activations."""
        return self.source or self.name


def _same_constants(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    """Whether two graphs hold the same constants (a generator's state made from a seed that
    is a fact, a table made from a size): the same code reads them."""
    return a.keys() == b.keys() and all(
        a[k].shape == b[k].shape and a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a
    )


class _Absent:
    """The kind of an input a call does not give (an item of ``*args`` or ``**kwargs``)."""


_ABSENT = _Absent()


def _kind_name(kind: Any) -> str:
    if kind is _Absent:
        return "not given"
    if isinstance(kind, tuple):
        return f"a {kind[0].__name__} of {len(kind[1])}"
    return "None" if kind is type(None) else f"a {kind.__name__}"


def signature_of(fn: Callable[..., Any]) -> inspect.Signature:
    """``inspect.signature(fn)``, or for a method of a loaded TorchScript file (which Python
    cannot inspect) the signature its TorchScript schema declares."""
    try:
        return inspect.signature(fn)
    except ValueError:
        schema = getattr(fn, "schema", None)
        if schema is None:
            raise
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature(
        [
            inspect.Parameter(
                a.name,
                kind,
                default=a.default_value if a.has_default_value() else inspect.Parameter.empty,
            )
            for a in schema.arguments[1:]  # the first is self
        ]
    )
