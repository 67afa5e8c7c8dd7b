"""Property-based tests: random sequences of operations on bended modules, checked by invariants.

Hypothesis draws sequences of operations (bend any registered callback with valid arguments on
a weight or an activation picked from the tables, update controls, reset, write, set and mix
versions, trace other shapes, call with other shapes, pull activations out and inject them
back, save the bending config and load it into a fresh module, export to TorchScript) and
runs them on four models (``tests/property_models.py``). What must hold whatever the sequence:

- the wrapped module's parameters and buffers never change, bit for bit;
- with nothing bent (after ``reset()``, say), outputs are those of the eager module with the
  active version's weights, bit for bit;
- an operation that raises a :class:`torchbend.TorchbendError` leaves the outputs as they
  were, and so do tracing, writing versions, ``with set_version``/``interpolate``, reading
  activations, saving a config and exporting;
- the same sequence run twice gives the same outputs, bit for bit; a saved config loaded into
  a fresh module gives the same outputs;
- injecting an activation taken with ``get_activations`` gives the output of the full call;
- a TorchScript export gives the outputs of the bended module.

Other properties: simple callbacks equal hand-written eager references (forward hooks on a
copy of the module), controls after their ramps equal callbacks built with the final values,
``tb.audio.Stream`` on the shipped model equals an offline call, and garbage configurations
only raise :class:`torchbend.TorchbendError` and never import the modules they name.

Budget: ``HYPOTHESIS_PROFILE=ci`` (the default, see ``tests/conftest.py``) runs about 600
examples, derandomized, in about 30 s on two cores; ``HYPOTHESIS_PROFILE=long`` runs 15 times as
many, random and shrunk on failure (about ten minutes when all pass; shrinking adds minutes).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from property_models import MODELS, ModelSpec, make_input, pristine
from torch import nn

import torchbend as tb
from torchbend.callbacks import CALLBACKS
from torchbend.callbacks.draws import target_generator
from torchbend.config import FORMAT, VERSION

LONG = os.environ.get("HYPOTHESIS_PROFILE", "ci") == "long"


def examples(n: int) -> int:
    """``n`` examples in the ci profile, many more in the long one."""
    return n * 15 if LONG else n


SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]


def note(text: str) -> None:
    """``hypothesis.note``, also outside a test (to replay a sequence by hand)."""
    try:
        hypothesis.note(text)
    except InvalidArgument:
        pass


def event(text: str) -> None:
    """``hypothesis.event`` (counted in ``--hypothesis-show-statistics``), also outside a test."""
    try:
        hypothesis.event(text)
    except InvalidArgument:
        pass


# -- bit-exact comparisons -----------------------------------------------------------------------


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def same_bits(a: Any, b: Any) -> bool:
    """Whether two tensors are identical: dtype, shape and every bit (NaN and -0.0 included)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return a == b
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))


def assert_same(got: Any, expected: Any, what: str) -> None:
    assert isinstance(got, torch.Tensor), f"{what}: got {type(got).__name__}"
    if not same_bits(got, expected):
        diff = (
            (got.double() - expected.double()).abs().max().item()
            if got.shape == expected.shape
            else None
        )
        raise AssertionError(
            f"{what}: outputs differ (shapes {list(got.shape)} / {list(expected.shape)}, "
            f"max abs difference {diff})"
        )


def assert_close(got: torch.Tensor, expected: torch.Tensor, what: str, tol: float = 1e-5) -> None:
    scale = max(1.0, expected.detach().abs().max().item()) if expected.numel() else 1.0
    torch.testing.assert_close(
        got.detach(), expected.detach(), rtol=tol, atol=tol * scale, equal_nan=True, msg=what
    )


def state_bits(module: nn.Module) -> dict[str, torch.Tensor]:
    """The bits of every parameter and buffer of ``module`` (non-persistent buffers too)."""
    tensors = [*module.named_parameters(), *module.named_buffers()]
    return {name: bits(t).clone() for name, t in tensors}


def assert_state_untouched(module: nn.Module, snapshot: dict[str, torch.Tensor]) -> None:
    now = state_bits(module)
    assert list(now) == list(snapshot), "the wrapped module's parameters or buffers changed names"
    for key, value in snapshot.items():
        assert torch.equal(now[key], value), f"the wrapped module's {key} changed"


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {re.sub(r'0x[0-9a-f]+', '0x?', str(e))}"


# -- callbacks and their valid arguments ---------------------------------------------------------


@dataclass(frozen=True)
class Num:
    """A numeric argument: the values drawn (within the callback's declared bounds), which are
    also the range of a control given instead."""

    kind: type
    low: float = 0.0
    high: float = 1.0
    none: bool = False

    def values(self) -> st.SearchStrategy[Any]:
        if self.kind is bool:
            drawn: st.SearchStrategy[Any] = st.booleans()
        elif self.kind is int:
            drawn = st.integers(int(self.low), int(self.high))
        else:
            drawn = st.floats(self.low, self.high, allow_nan=False, allow_infinity=False)
        return st.none() | drawn if self.none else drawn

    def control_range(self) -> tuple[Any, Any] | None:
        if self.kind is bool:
            return None
        return (self.kind(self.low), self.kind(self.high))


SEED = st.integers(0, 2**16)
AXIS = st.sampled_from([-1, -2])
AXES = st.sampled_from([None, -1, -2, (-2, -1)])

# Every registered callback but those that take tensors, captures or functions.
ARGS: dict[str, dict[str, Num | st.SearchStrategy[Any]]] = {
    "Scale": {"scale": Num(float, -3.0, 3.0)},
    "Bias": {"bias": Num(float, -1.0, 1.0)},
    "Affine": {"scale": Num(float, -2.0, 2.0), "bias": Num(float, -1.0, 1.0)},
    "Clamp": {"min": Num(float, -2.0, 0.0, none=True), "max": Num(float, 0.0, 2.0, none=True)},
    "Mask": {"prob": Num(float), "dim": AXES, "seed": SEED},
    "Noise": {
        "std": Num(float),
        "op": st.sampled_from(["add", "mul"]),
        "dim": st.sampled_from([None, -1, -2, ()]),
        "seed": st.none() | SEED,
    },
    "Permute": {"dim": AXIS, "seed": SEED, "amount": Num(float)},
    "Roll": {"shift": Num(float, -1.0, 1.0), "dim": AXIS},
    "Flip": {"dim": st.sampled_from([-1, -2, (-2, -1)]), "active": Num(bool)},
    "TimeStretch": {"factor": Num(float, 0.0, 3.0)},
    "Threshold": {"value": Num(float)},
    "ThresholdActivation": {"keep": Num(float), "dim": AXIS},
    "Filter": {
        "kind": st.sampled_from(["lowpass", "highpass", "bandpass", "bandstop"]),
        "cutoff": Num(float, 0.01, 0.5),
        "resonance": Num(float, 0.1, 8.0),
        "dim": st.just(-1),
        "mix": Num(float),
        "carry": st.just(False),
    },
    "Reverse": {"block": Num(int, 1, 8, none=True)},
    "Unphase": {"shift": Num(float), "seed": SEED, "dim": st.just(-2)},
    "Erode": {"size": Num(int, 1, 5)},
    "Dilate": {"size": Num(int, 1, 5)},
    "SoftClip": {"drive": Num(float, 0.0, 4.0)},
    "Tanh": {"active": Num(bool)},
    "Quantize": {"bits": Num(int, 0, 16, none=True)},
    "Invert": {"mode": st.sampled_from(["sign", "one_minus"]), "active": Num(bool)},
    "Spread": {"amount": Num(float, -1.0, 2.0)},
    "Ablate": {
        "channels": st.sampled_from([None, [0], [0, -1]]),
        "fraction": Num(float),
        "dim": AXIS,
        "seed": SEED,
    },
    "Solo": {"channels": st.sampled_from([0, [0], [0, -1]]), "dim": AXIS, "active": Num(bool)},
    "Randomize": {"fraction": Num(float), "std": Num(float, 0.0, 2.0), "seed": SEED},
    "Offset": {"offset": Num(float), "dim": AXIS, "seed": SEED},
}
NOT_DRAWN = {
    "Capture",
    "Chain",
    "InterpolateActivation",
    "InterpolationFromCapture",
    "Lambda",
    "Rewire",  # takes the name of a node: tests/test_rewire.py
    "Snapshot",  # takes tensors: tests/callbacks/test_snapshot.py
    "Steer",  # takes a vector fitted to its node: tests/callbacks/test_steer.py
    "Gains",  # likewise
}


@dataclass
class CallbackSpec:
    """A callback to build: its class, its arguments, and which of them are controls
    (``arg -> (ramp, reuse an existing control if one fits)``)."""

    cls: str
    args: dict[str, Any]
    controlled: dict[str, tuple[int, bool]] = field(default_factory=dict)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        ctl = f" controls={self.controlled}" if self.controlled else ""
        return f"{self.cls}({args}){ctl}"


@dataclass
class ChainSpec:
    parts: tuple[CallbackSpec, ...]

    def __repr__(self) -> str:
        return " >> ".join(map(repr, self.parts))


Spec = CallbackSpec | ChainSpec


@st.composite
def callback_specs(
    draw: st.DrawFn, names: tuple[str, ...] = tuple(ARGS), control: float = 0.25
) -> CallbackSpec:
    cls = draw(st.sampled_from(names))
    args: dict[str, Any] = {}
    controlled: dict[str, tuple[int, bool]] = {}
    for arg, decl in ARGS[cls].items():
        if isinstance(decl, Num):
            args[arg] = draw(decl.values())
            controls = control >= 1.0 or draw(st.integers(0, 99)) < 100 * control
            if args[arg] is not None and controls:
                controlled[arg] = (draw(st.integers(0, 3)), draw(st.booleans()))
        else:
            args[arg] = draw(decl)
    if cls == "Clamp" and args["min"] is not None and args["max"] is not None:
        assert args["min"] <= args["max"]
    return CallbackSpec(cls, args, controlled)


def specs(names: tuple[str, ...] = tuple(ARGS), control: float = 0.25) -> st.SearchStrategy[Spec]:
    one = callback_specs(names, control)
    chain = st.tuples(one, one).map(ChainSpec)
    return st.one_of(one, one, one, chain)


# -- running sequences of operations -------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    key: str
    pattern: str
    weight: bool
    module: str | None = None
    """For an activation that is a submodule's output (called once), that submodule."""


def build(
    spec: Spec,
    target: Target,
    control: Callable[[str, str, Any, int, bool], Any] | None = None,
    global_noise: bool = False,
) -> tb.BendingCallback:
    """The callback ``spec`` describes, for ``target``; ``control(cls, arg, value, ramp,
    reuse)`` gives the control of each controlled argument (plain numbers without it)."""
    if isinstance(spec, ChainSpec):
        first, *rest = (build(p, target, control, global_noise) for p in spec.parts)
        for cb in rest:
            first = first >> cb
        return first
    args = dict(spec.args)
    if spec.cls == "Noise":
        if target.weight and args["seed"] is None:
            args["seed"] = 0  # a weight's noise is drawn when it is bent: draw it from a seed
        if global_noise and not target.weight:
            args["seed"] = None
    if control is not None:
        for arg, (ramp, reuse) in spec.controlled.items():
            if args.get(arg) is not None:
                args[arg] = control(spec.cls, arg, args[arg], ramp, reuse)
    return getattr(tb, spec.cls)(**args)


class Runner:
    """Runs operations on a bended model, checking the invariants after each; ``log`` keeps
    what each returned (to compare two runs of the same sequence)."""

    def __init__(self, model: str, tmp: Path) -> None:
        self.spec: ModelSpec = MODELS[model]
        self.model = model
        self.tmp = tmp
        self.module = pristine(model)
        self.snapshot = state_bits(self.module)
        self.bended = tb.BendedModule(self.module)
        self.references: dict[str, nn.Module] = {"original": pristine(model)}
        self.versions: dict[str, dict[str, torch.Tensor]] = {}
        self.log: list[tuple[str, Any]] = []
        self.counter = 0
        self.calls = 0
        self.mix: dict[str, torch.Tensor] | None = None
        """The weights interpolate() mixed, while a mix is the base of bendings."""
        self.last: tuple[torch.Tensor, bool, torch.Tensor, int] | None = None
        self.seen: dict[tuple[int, ...], torch.Tensor] = {}
        self.global_noise = False
        """Give activation noise torch's global generator (seeded before each call)."""
        self.strict_activations = False
        """Fail when from_activations refuses what get_activations gave (its own test)."""
        x = self.input(0, 0)
        self.bended.trace(**self.spec.inputs(x))
        self.seen[tuple(x.shape)] = x

    # -- helpers -------------------------------------------------------------------------------

    def input(self, shape: int, seed: int) -> torch.Tensor:
        return make_input(self.spec, self.spec.shapes[shape % len(self.spec.shapes)], seed)

    def ramping(self) -> bool:
        return any(c.ramping() for c in self.bended.controllables.values())

    def stateful(self) -> bool:
        """Whether a bending keeps state from call to call (activation noise with a seed draws
        from its own generator)."""
        for bending in self.bended.bendings:
            if any(bending.activations.values()):
                for cb in bending.callback.modules():
                    if isinstance(cb, tb.Noise) and cb.seed is not None:
                        return True
        return False

    def noisy(self) -> bool:
        """Whether an activation is bent with noise (drawn anew at each call)."""
        return any(
            isinstance(cb, tb.Noise)
            for bending in self.bended.bendings
            if any(bending.activations.values())
            for cb in bending.callback.modules()
        )

    def reference(self, version: str) -> nn.Module:
        if version not in self.references:
            module = pristine(self.model)
            with torch.no_grad():
                for name, value in self.versions[version].items():
                    module.get_parameter(name).copy_(value)
            self.references[version] = module
        return self.references[version]

    def targets(self) -> list[Target]:
        found = [Target(w, re.escape(w) + "$", True) for w in self.bended.weight_names]
        for fn in self.bended.traced_methods:
            infos = self.bended.activations(fn)
            calls: dict[str, int] = {}
            for a in infos:
                if a.op == "call_module":
                    calls[str(a.target)] = calls.get(str(a.target), 0) + 1
            for a in infos:
                if not isinstance(a.shape, torch.Size) or not isinstance(a.dtype, torch.dtype):
                    continue
                if not a.dtype.is_floating_point:
                    continue
                once = a.op == "call_module" and calls[str(a.target)] == 1
                module = str(a.target) if once else None
                found.append(Target(f"{fn}:{a.name}", f"{fn}:{re.escape(a.name)}$", False, module))
        return found

    def control(self, cls: str, arg: str, value: Any, ramp: int, reuse: bool) -> Any:
        num = ARGS[cls][arg]
        assert isinstance(num, Num)
        if reuse:
            for _, c in sorted(self.bended.controllables.items()):
                if c.kind == num.kind.__name__ and c.range == num.control_range():
                    return c
        name = f"c{self.counter}"
        self.counter += 1
        return tb.BendingParameter(name, num.kind(value), range=num.control_range(), ramp=ramp)

    def build(self, spec: Spec, target: Target) -> tb.BendingCallback:
        return build(spec, target, self.control, self.global_noise)

    # -- calls ---------------------------------------------------------------------------------

    def raw_call(self, x: torch.Tensor, no_grad: bool, seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        with torch.set_grad_enabled(not no_grad):
            return self.bended(x)

    def call(self, x: torch.Tensor, no_grad: bool) -> torch.Tensor:
        self.seen.setdefault(tuple(x.shape), x)
        ramping = self.ramping()
        self.calls += 1
        seed = self.calls
        y = self.raw_call(x, no_grad, seed)
        if not self.bended.bendings:
            version = self.bended.version
            reference = self.reference(version) if self.mix is None else self.eager_with(self.mix)
            torch.manual_seed(seed)
            with torch.set_grad_enabled(not no_grad):
                expected = reference(x)
            if self.mix is not None:
                assert_close(y, expected, "interpolate() != eager on the mixed weights")
            else:
                assert_same(y, expected, f"nothing bent, version {version!r}: bended != eager")
                for name in self.bended.weight_names:
                    weight = self.bended.weight(name)
                    assert same_bits(weight, reference.get_parameter(name)), name
        steady = not (ramping or self.ramping() or self.stateful())
        if no_grad and steady and not self.noisy():
            # Without autograd, static channel bendings are folded into the weights of the
            # layers that read them: the same outputs, up to rounding.
            assert_close(y, self.raw_call(x, False, seed), "folded (no_grad) != unfolded")
        self.last = (x, no_grad, y.detach().clone(), seed) if steady else None
        return y

    def check_unchanged(self, what: str) -> None:
        """The last call, made again, gives the same output (nothing changed since)."""
        if self.last is not None:
            x, no_grad, y, seed = self.last
            assert_same(self.raw_call(x, no_grad, seed), y, f"{what} changed the outputs")

    # -- operations ----------------------------------------------------------------------------

    def run(self, ops: list[tuple[Any, ...]]) -> list[tuple[str, Any]]:
        for op in ops:
            note(f"op {op!r}")
            try:
                result = getattr(self, f"op_{op[0]}")(*op[1:])
            except tb.TorchbendError as e:
                note(f"  -> {error_text(e)}")
                event(f"{op[0]} raised {type(e).__name__}")
                self.log.append((op[0], error_text(e)))
                self.check_unchanged(f"{op[0]} that raised {type(e).__name__}")
            else:
                event(f"{op[0]} ran")
                self.log.append((op[0], result))
            assert_state_untouched(self.module, self.snapshot)
        return self.log

    def op_call(self, shape: int, seed: int, no_grad: bool) -> torch.Tensor:
        return self.call(self.input(shape, seed), no_grad)

    def op_trace(self, shape: int, seed: int) -> None:
        x = self.input(shape, seed)
        self.seen.setdefault(tuple(x.shape), x)
        self.bended.trace(**self.spec.inputs(x))
        self.check_unchanged("trace")

    def op_bend(self, spec: Spec, index: int, options: dict[str, Any] | None = None) -> list[str]:
        targets = self.targets()
        target = targets[index % len(targets)]
        note(f"  target {target.key}")
        callback = self.build(spec, target)
        before = len(self.bended.bendings)
        try:
            keys = self.bended.bend(callback, target.pattern, **(options or {}))
        except tb.TorchbendError:
            assert len(self.bended.bendings) == before, "a failed bend() was kept"
            raise
        self.last = None
        return keys

    def op_update(self, index: int, fraction: float, ramp: bool) -> Any:
        controls = sorted(self.bended.controllables.items())
        if not controls:
            return None
        name, control = controls[index % len(controls)]
        if control.kind == "bool":
            value: Any = fraction >= 0.5
        else:
            assert control.range is not None
            low, high = control.range
            value = min(max(low + fraction * (high - low), low), high)
            if control.kind == "int":
                value = round(value)
        self.bended.update(name, value, ramp=ramp)
        self.last = None
        return (name, value)

    def op_reset(self, seed: int) -> torch.Tensor:
        self.bended.reset()
        self.mix = None  # reset() drops a mix left by interpolate() without `with`
        return self.call(self.input(0, seed), False)  # checked against the eager module

    def op_write(self, index: int) -> None:
        version = f"v{index}"
        weights = {n: self.bended.weight(n).detach().clone() for n in self.bended.weight_names}
        self.bended.write(version)
        self.versions[version] = weights
        self.references.pop(version, None)
        self.check_unchanged("write")

    def op_create_version(self, index: int, seed: int) -> None:
        version = f"v{index}"
        generator = torch.Generator().manual_seed(seed)
        weights = {
            n: p.detach() + 0.1 * torch.randn(p.shape, generator=generator)
            for n, p in pristine(self.model).named_parameters()
        }
        self.bended.create_version(version, weights)
        self.versions[version] = weights
        self.references.pop(version, None)
        if version == self.bended.version:
            # New weights for the active version: bendings apply to them from now on (a mix
            # left by interpolate() gives way to them too).
            self.mix, self.last = None, None
            return
        self.check_unchanged("create_version")

    def op_set_version(self, index: int, scoped: bool, seed: int) -> Any:
        version = ["original", "v0", "v1", "v2"][index % 4]
        if not scoped:
            self.bended.set_version(version)
            self.last, self.mix = None, None
            return self.bended.version
        last, mix = self.last, self.mix
        with self.bended.set_version(version):
            self.mix = None
            try:
                y = self.call(self.input(0, seed), False)
            finally:
                self.mix = mix
        self.last = last
        self.check_unchanged("with set_version(...)")
        return y

    def op_interpolate(self, weights: list[float], scoped: bool, seed: int) -> Any:
        names = self.bended.versions[: len(weights)]
        mix = dict(zip(names, weights))
        x = self.input(0, seed)
        if not scoped:  # the mix stays until reset() or set_version()
            self.bended.interpolate(**mix)
            self.mix, self.last = self.mixed(mix), None
            return self.call(x, False)
        last, previous = self.last, self.mix
        with self.bended.interpolate(**mix):
            self.mix = self.mixed(mix)
            try:
                y = self.call(x, False)
            finally:
                self.mix = previous
        self.last = last
        self.check_unchanged("with interpolate(...)")
        return y

    def mixed(self, mix: dict[str, float]) -> dict[str, torch.Tensor]:
        """The weights ``interpolate(**mix)`` mixes (the versions' weights now)."""
        total = sum(mix.values())
        mixed = {}
        for name in self.bended.weight_names:
            terms = [w / total * self.version_weight(v, name) for v, w in mix.items()]
            mixed[name] = torch.stack(terms).sum(0)
        return mixed

    def eager_with(self, weights: dict[str, torch.Tensor]) -> nn.Module:
        module = pristine(self.model)
        with torch.no_grad():
            for name, p in module.named_parameters():
                p.copy_(weights[name])
        return module

    def version_weight(self, version: str, name: str) -> torch.Tensor:
        if version == "original":
            return pristine(self.model).get_parameter(name).detach()
        return self.versions[version][name]

    def op_activations(self, shape: int, seed: int, index: int) -> Any:
        x = self.input(shape, seed)
        inputs = self.spec.inputs(x)
        ramping = self.ramping()
        y = self.call(x, False)  # traces x's graph if needed
        nodes = [t for t in self.targets() if not t.weight and t.key.startswith("forward:")]
        nodes = [t for t in nodes if t.key != f"forward:{self.spec.input}"]
        if self.strict_activations:
            nodes = [t for t in nodes if t.module is not None]  # layer outputs
        target = nodes[index % len(nodes)]
        node = target.key.split(":", 1)[1]
        note(f"  activation {node}")
        torch.manual_seed(self.calls)
        got = self.bended.get_activations(re.escape(node) + "$", **inputs)
        assert list(got) == [node], f"get_activations({node!r}) gave {list(got)}"
        if target.module is not None and self.bended.version == "original":
            seen: list[torch.Tensor] = []
            eager = self.reference("original")
            hook = eager.get_submodule(target.module).register_forward_hook(
                lambda m, i, o: seen.append(o)
            )
            try:
                eager(x)
            finally:
                hook.remove()
            try:
                plain = self.bended.get_activations(re.escape(node) + "$", bended=False, **inputs)
            except tb.TorchbendError as e:
                raise AssertionError(
                    f"get_activations({node!r}, bended=False) refused {list(x.shape)}: "
                    f"{error_text(e)}"
                ) from e
            assert_same(plain[node], seen[0], f"get_activations({node!r}, bended=False)")
        try:
            try:
                out = self.bended.from_activations(node, **{node: got[node]})
            except tb.TracingError as e:
                if "missing" not in str(e):
                    raise
                out = self.bended.from_activations(node, **{node: got[node]}, **inputs)
        except tb.TracingError as e:
            if self.strict_activations:
                raise AssertionError(
                    f"from_activations({node!r}) refused what get_activations({node!r}) gave "
                    f"on {list(x.shape)}: {error_text(e)}"
                ) from e
            raise
        if not (ramping or self.ramping() or self.noisy()):
            assert_same(out, y, f"from_activations({node!r}, get_activations({node!r}))")
        self.check_unchanged("get_activations/from_activations")
        return out

    def op_config(self, seed: int) -> Any:
        if self.bended.version != "original" or self.mix is not None:
            return None  # a fresh module has the original weights
        if self.ramping() or self.stateful():
            return None
        path = self.tmp / f"config{len(self.log)}.json"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Noise(seed=None): draws from torch's generator
            config = self.bended.bending_config()
            config.save(path)
        loaded = tb.BendingConfig.load(path)
        assert loaded == config, "a saved config loads back different"
        fresh = tb.BendedModule(pristine(self.model))
        for x in self.seen.values():
            fresh.trace(**self.spec.inputs(x))
        fresh.bend(loaded)
        x = self.input(0, seed)
        self.calls += 1
        expected = self.raw_call(x, False, self.calls)
        torch.manual_seed(self.calls)
        assert_same(fresh(x), expected, "a config loaded into a fresh module")
        self.check_unchanged("saving a config")
        return expected

    def op_export(self, shape: int, seed: int) -> Any:
        x = self.input(shape, seed)
        self.bended.trace(**self.spec.inputs(x))  # the graph exported is the last traced
        self.seen.setdefault(tuple(x.shape), x)
        try:
            scripted = tb.export.torchscript(self.bended)
        except tb.ExportError as e:
            # Controls driving derived state export too: set_ derives it again, as update does.
            raise AssertionError(f"export refused: {error_text(e)}") from e
        if self.stateful():
            return None
        self.calls += 1
        expected = self.raw_call(x, True, self.calls)  # ramps under way go on in both
        torch.manual_seed(self.calls)
        with torch.no_grad():
            got = scripted(x)
        assert_same(got, expected, "TorchScript export != bended module")
        self.check_unchanged("exporting")
        if self.spec.value_decisions:
            return got  # a control may change a decision, which the export does not check
        for name, control in sorted(self.bended.controllables.items()):
            value = other_value(control)
            assert getattr(scripted, f"set_{name}")(value) == 0, f"set_{name}({value!r}) refused"
            self.bended.update(name, value)  # set_ ramps as update does
            self.last = None
            self.calls += 1
            expected = self.raw_call(x, True, self.calls)
            torch.manual_seed(self.calls)
            with torch.no_grad():
                got = scripted(x)
            assert_same(got, expected, f"TorchScript export after set_{name}({value!r})")
        return got

    def op_copy(self, seed: int) -> Any:
        """A bended module refuses to be copied (a copy would mix the two modules' weights),
        and is left as it was."""
        with pytest.raises(tb.BendingError, match="cannot be copied or pickled"):
            copy.deepcopy(self.bended)
        return None


def other_value(control: tb.BendingParameter) -> Any:
    """A value of ``control`` within its range, other than its current one if it can."""
    if control.kind == "bool":
        return not control.get()
    assert control.range is not None
    low, high = control.range
    value = (low + high) / 2 if control.get() != (low + high) / 2 else high
    return round(value) if control.kind == "int" else float(value)


SHAPE = st.integers(0, 3)
DATA = st.integers(0, 1000)
NOISE_ARGS = {"std": 0.1, "op": "add", "dim": None, "seed": 0}


OPTIONS: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {},
    optional={
        "blend": st.floats(0.0, 1.0),
        "subset": st.builds(
            tb.Subset, st.floats(0.0, 1.0), st.sampled_from([None, -2]), st.integers(0, 9)
        ),
        # In samples only: a window in calls counts calls, which a config applied afresh
        # does not (the config invariant would not hold).
        "window": st.builds(
            tb.Window,
            st.integers(0, 8),
            st.sampled_from([None, 12, 24]),
            st.just("samples"),
            st.integers(0, 3),
        ),
        "guard": st.one_of(
            st.booleans(),
            st.builds(tb.Guard, st.booleans(), st.sampled_from([None, 0.5, 4.0]), st.booleans()),
        ),
    },
)
"""Options of ``bend`` (how the callback applies)."""


def operations(export: bool = True) -> st.SearchStrategy[tuple[Any, ...]]:
    kinds = [
        st.tuples(st.just("call"), SHAPE, DATA, st.booleans()),
        st.tuples(st.just("call"), SHAPE, DATA, st.booleans()),
        st.tuples(st.just("trace"), SHAPE, DATA),
        st.tuples(st.just("bend"), specs(), st.integers(0, 10**6)),
        st.tuples(st.just("bend"), specs(), st.integers(0, 10**6)),
        st.tuples(st.just("bend"), specs(), st.integers(0, 10**6), OPTIONS),
        st.tuples(st.just("update"), st.integers(0, 50), st.floats(0.0, 1.0), st.booleans()),
        st.tuples(st.just("update"), st.integers(0, 50), st.floats(0.0, 1.0), st.booleans()),
        st.tuples(st.just("reset"), DATA),
        st.tuples(st.just("write"), st.integers(0, 2)),
        st.tuples(st.just("create_version"), st.integers(0, 2), DATA),
        st.tuples(st.just("set_version"), st.integers(0, 3), st.booleans(), DATA),
        st.tuples(
            st.just("interpolate"),
            st.lists(st.floats(0.0, 2.0), min_size=1, max_size=3),
            st.booleans(),
            DATA,
        ),
        st.tuples(st.just("activations"), SHAPE, DATA, st.integers(0, 10**6)),
        st.tuples(st.just("config"), DATA),
        st.tuples(st.just("copy"), DATA),
    ]
    if export:
        kinds.append(st.tuples(st.just("export"), SHAPE, DATA))
    return st.one_of(kinds)


def sequences(export: bool) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    return st.lists(operations(export), min_size=3, max_size=12 if not LONG else 20)


def test_every_registered_callback_is_drawn() -> None:
    assert set(ARGS) == set(CALLBACKS) - NOT_DRAWN


@pytest.mark.parametrize("model", list(MODELS))
@settings(max_examples=examples(20), suppress_health_check=SLOW)
@given(ops=sequences(export=False))
def test_sequences_keep_invariants_and_replay_exactly(
    model: str, ops: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        first = Runner(model, Path(tmp)).run(ops)
        second = Runner(model, Path(tmp)).run(ops)
    assert len(first) == len(second)
    for (op, a), (_, b) in zip(first, second):
        if isinstance(a, torch.Tensor):
            assert_same(b, a, f"{op} run twice")
        else:
            assert a == b, f"{op} run twice: {a!r} != {b!r}"


@pytest.mark.parametrize("model", list(MODELS))
@settings(max_examples=examples(6), suppress_health_check=SLOW)
@given(ops=sequences(export=True), shape=SHAPE, seed=DATA)
@example(  # a live control on a seeded Noise bending a weight: scripted like Python
    ops=[("bend", CallbackSpec("Noise", NOISE_ARGS, {"std": (0, False)}), 0)], shape=0, seed=0
)
def test_torchscript_export_equals_python(
    model: str, ops: list[tuple[Any, ...]], shape: int, seed: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(model, Path(tmp))
        runner.run([*ops, ("export", shape, seed)])


@pytest.mark.parametrize("model", list(MODELS))
@settings(max_examples=examples(8), suppress_health_check=SLOW)
@given(
    bends=st.lists(st.tuples(st.just("bend"), specs(), st.integers(0, 10**6)), max_size=2),
    shape=SHAPE,
    seed=DATA,
    node=st.integers(0, 10**6),
)
@example(  # the bending flips the decision on values for this input (FlowNet)
    bends=[("bend", CallbackSpec("Scale", {"scale": -3.0}), 1)], shape=0, seed=0, node=3
)
def test_activations_taken_out_and_injected_back_give_the_output(
    model: str, bends: list[tuple[Any, ...]], shape: int, seed: int, node: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(model, Path(tmp))
        runner.strict_activations = True
        runner.run([*bends, ("activations", shape, seed, node)])
        assert runner.log[-1][0] == "activations"


# -- simple callbacks against eager references ---------------------------------------------------


def reference_bend(spec: Spec, x: torch.Tensor, key: str, shape: torch.Size) -> torch.Tensor:
    """What ``spec`` does to ``x`` (target ``key`` traced with ``shape``), written from the
    documentation of each callback."""
    if isinstance(spec, ChainSpec):
        for part in spec.parts:
            x = reference_bend(part, x, key, shape)
        return x
    a = spec.args
    if spec.cls == "Scale":
        return x if a["scale"] == 1.0 else x * a["scale"]
    if spec.cls == "Bias":
        return x if a["bias"] == 0.0 else x + a["bias"]
    if spec.cls == "Affine":
        y = x if a["scale"] == 1.0 else x * a["scale"]
        return y if a["bias"] == 0.0 else y + a["bias"]
    if spec.cls == "Clamp":
        if a["min"] is None and a["max"] is None:
            return x
        return torch.clamp(x, a["min"], a["max"])
    if spec.cls == "Mask":
        if a["prob"] == 0.0:
            return x
        size = list(shape)
        if a["dim"] is not None:
            dims = [a["dim"]] if isinstance(a["dim"], int) else list(a["dim"])
            size = [n if i in dims or i - len(shape) in dims else 1 for i, n in enumerate(shape)]
        noise = torch.rand(size, generator=target_generator(a["seed"], key))
        return x * (noise >= a["prob"]).to(x.dtype)
    if spec.cls == "Tanh":
        return torch.tanh(x) if a["active"] else x
    if spec.cls == "Invert":
        if not a["active"]:
            return x
        return -x if a["mode"] == "sign" else 1 - x
    if spec.cls == "Flip":
        if not a["active"]:
            return x
        return torch.flip(x, [a["dim"]] if isinstance(a["dim"], int) else list(a["dim"]))
    if spec.cls == "Threshold":
        if a["value"] == 0.0:
            return x
        return torch.where(x.abs() < a["value"], torch.zeros_like(x), x)
    if spec.cls == "SoftClip":
        if a["drive"] == 0.0:
            return x
        drive = max(a["drive"], 1e-4)  # documented: smaller drives are computed as 1e-4
        return torch.tanh(x * drive) / math.tanh(drive)
    if spec.cls == "Roll":
        size = x.shape[a["dim"]]
        steps = math.floor(a["shift"] * size + 0.5) % size
        return x if steps == 0 else torch.roll(x, steps, a["dim"])
    raise AssertionError(f"no reference for {spec.cls}")


SIMPLE = (
    "Scale",
    "Bias",
    "Affine",
    "Clamp",
    "Mask",
    "Tanh",
    "Invert",
    "Flip",
    "Threshold",
    "SoftClip",
    "Roll",
)


@pytest.mark.parametrize("model", list(MODELS))
@settings(max_examples=examples(25), suppress_health_check=SLOW)
@given(
    bends=st.lists(
        st.tuples(specs(SIMPLE, control=0.0), st.integers(0, 10**6)), min_size=1, max_size=3
    ),
    seed=DATA,
)
def test_simple_callbacks_equal_eager_references(
    model: str, bends: list[tuple[Spec, int]], seed: int
) -> None:
    """Weights bent by hand and forward hooks on a copy of the module give the same outputs,
    bit for bit with autograd on (nothing folded), and close with it off (folded)."""
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(model, Path(tmp))
    bended = runner.bended
    targets = [t for t in runner.targets() if t.weight or t.module is not None]
    eager = pristine(model)
    weights = {n: p.detach().clone() for n, p in eager.named_parameters()}
    for spec, index in bends:
        target = targets[index % len(targets)]
        note(f"bend {spec!r} on {target.key}")
        try:
            bended.bend(runner.build(spec, target), target.pattern)
        except tb.BendingError as e:
            note(f"  -> {error_text(e)}")
            continue
        if target.weight:
            w = weights[target.key]
            weights[target.key] = reference_bend(spec, w, target.key, w.shape)
        else:
            assert target.module is not None
            shape = bended.activation_shape(target.key.split(":", 1)[1])

            def hook(
                m: nn.Module,
                i: Any,
                o: torch.Tensor,
                spec: Spec = spec,
                key: str = target.key,
                shape: Any = shape,
            ) -> torch.Tensor:
                return reference_bend(spec, o, key, shape)

            eager.get_submodule(target.module).register_forward_hook(hook)
    with torch.no_grad():
        for name, p in eager.named_parameters():
            p.copy_(weights[name])
    spec0 = MODELS[model]
    x = make_input(spec0, spec0.shapes[0], seed)
    assert_same(bended(x), eager(x), "bended != eager with hooks")
    with torch.no_grad():
        assert_close(bended(x), eager(x), "bended (no_grad, folded) != eager with hooks")
    assert_state_untouched(runner.module, runner.snapshot)


# -- controls ----------------------------------------------------------------------------------


@pytest.mark.parametrize("model", list(MODELS))
@settings(max_examples=examples(20), suppress_health_check=SLOW)
@given(
    bends=st.lists(st.tuples(specs(control=1.0), st.integers(0, 10**6)), min_size=1, max_size=3),
    updates=st.lists(
        st.tuples(st.integers(0, 50), st.floats(0.0, 1.0), st.booleans(), st.integers(0, 2)),
        min_size=1,
        max_size=4,
    ),
    seed=DATA,
)
@example(  # the Ablate cannot bend the (1-d) second weight; the Mask's control is shared
    bends=[
        (CallbackSpec("Mask", {"prob": 1.0, "dim": None, "seed": 0}, {"prob": (0, False)}), 0),
        (
            CallbackSpec(
                "Ablate",
                {"channels": None, "fraction": 0.0, "dim": -2, "seed": 0},
                {"fraction": (0, True)},
            ),
            1,
        ),
    ],
    updates=[(0, 0.0, False, 0)],
    seed=0,
)
def test_controls_after_their_ramps_equal_callbacks_built_with_the_final_values(
    model: str,
    bends: list[tuple[Spec, int]],
    updates: list[tuple[int, float, bool, int]],
    seed: int,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(model, Path(tmp))
    runner.global_noise = True
    bended = runner.bended
    spec0 = MODELS[model]
    x = make_input(spec0, spec0.shapes[0], seed)
    built: list[tuple[Spec, Target, tb.BendingCallback]] = []
    for spec, index in bends:
        targets = runner.targets()
        target = targets[index % len(targets)]
        note(f"bend {spec!r} on {target.key}")
        callback = runner.build(spec, target)
        try:
            bended.bend(callback, target.pattern)
        except tb.BendingError as e:
            note(f"  -> {error_text(e)}")
            continue
        built.append((spec, target, callback))
    runner.call(x, False)
    for index, fraction, ramp, calls in updates:
        note(f"update -> {runner.op_update(index, fraction, ramp)}")
        for _ in range(calls):
            runner.call(x, False)
    for _ in range(4):  # ramps are 3 calls at most
        runner.call(x, False)
    assert not runner.ramping()

    if spec0.value_decisions and runner.noisy():
        return  # noise drawn before a decision: a new trace draws it too, in one module only
    direct = tb.BendedModule(pristine(model))
    direct.trace(**spec0.inputs(make_input(spec0, spec0.shapes[0], 0)))
    for spec, target, callback in built:
        direct.bend(final(spec, callback), target.pattern)
    for no_grad in (False, True):
        runner.calls += 1
        got = runner.raw_call(x, no_grad, runner.calls)
        torch.manual_seed(runner.calls)
        with torch.set_grad_enabled(not no_grad):
            expected = direct(x)
        if no_grad:
            assert_close(got, expected, "controls at their final values (no_grad)")
        else:
            assert_same(got, expected, "controls at their final values != direct values")


def final(spec: Spec, callback: tb.BendingCallback) -> tb.BendingCallback:
    """``spec`` built with plain numbers: the final values of the controls of ``callback``."""
    if isinstance(spec, ChainSpec):
        assert isinstance(callback, tb.Chain)
        parts = callback.chained()
        first, *rest = (final(s, cb) for s, cb in zip(spec.parts, parts, strict=True))
        for cb in rest:
            first = first >> cb
        return first
    args = dict(spec.args)
    for arg, value in callback.arguments().items():
        if isinstance(value, tb.BendingParameter):
            num = ARGS[spec.cls][arg]
            assert isinstance(num, Num)
            args[arg] = num.kind(value.get())
        elif arg == "seed":
            args[arg] = value
    return getattr(tb, spec.cls)(**args)


# -- streaming -------------------------------------------------------------------------------------

STREAMED = (
    "Scale",
    "Bias",
    "Affine",
    "Clamp",
    "Mask",
    "Tanh",
    "Invert",
    "Threshold",
    "SoftClip",
    "Ablate",
    "Solo",
    "Offset",
    "Permute",
)


@pytest.mark.audio
@settings(max_examples=examples(25), suppress_health_check=SLOW)
@given(
    activations=st.lists(
        st.tuples(specs(STREAMED, control=0.0), st.integers(0, 10**6)), max_size=2
    ),
    weights=st.lists(st.tuples(specs(control=0.0), st.integers(0, 10**6)), max_size=2),
    block=st.sampled_from([64, 128, 256]),
    length=st.integers(1, 1024),
    batch=st.integers(1, 2),
    seed=DATA,
)
def test_stream_of_the_shipped_model_equals_an_offline_call(
    activations: list[tuple[Spec, int]],
    weights: list[tuple[Spec, int]],
    block: int,
    length: int,
    batch: int,
    seed: int,
) -> None:
    spec = MODELS["tiny_rave"]
    x = make_input(spec, (batch, 1, length), seed)
    padded = torch.nn.functional.pad(x, (0, -length % block))
    offline = tb.BendedModule(pristine("tiny_rave"))
    offline.trace(x=padded)
    layers = [
        a.name for a in offline.activations() if a.op == "call_module"
    ]  # [batch, channels, frames]
    names = offline.weight_names
    chosen: list[tuple[Spec, str]] = []
    for s, index in activations:
        chosen.append((channelwise(s), f"forward:{re.escape(layers[index % len(layers)])}$"))
    for s, index in weights:
        chosen.append((s, re.escape(names[index % len(names)]) + "$"))
    streaming_model = pristine("tiny_rave")
    assert isinstance(streaming_model, tb.models.TinyRave)
    streaming = tb.BendedModule(streaming_model.set_streaming(True))
    streaming.trace(x=torch.zeros(batch, 1, block))
    for s, pattern in chosen:
        note(f"bend {s!r} on {pattern}")
        target = Target(pattern, pattern, not pattern.startswith("forward:"))
        try:
            offline.bend(build(s, target), pattern)
        except tb.BendingError:
            continue
        streaming.bend(build(s, target), pattern)
    with torch.no_grad():
        expected = offline(padded)[..., :length]
    stream = tb.audio.Stream(streaming, block_size=block)
    stream.reset()
    got = stream.process(x)
    assert_close(got, expected, f"streamed by {block} != offline")


def channelwise(spec: Spec) -> Spec:
    """``spec`` with its state along channels, so that it fits any length."""
    if isinstance(spec, ChainSpec):
        return ChainSpec(tuple(channelwise(p) for p in spec.parts))  # type: ignore[misc]
    if "dim" in spec.args:
        return CallbackSpec(spec.cls, {**spec.args, "dim": -2}, spec.controlled)
    return spec


# -- garbage configurations ------------------------------------------------------------------------

# Modules that no test imports and whose import is harmless; a configuration naming one must
# not import it. ``torch:_inductor.config`` names ``torch._inductor`` through torch's lazy
# ``__getattr__``: looking the attribute up imports it.
UNIMPORTED = ("this", "colorsys", "json.tool", "tabnanny", "wave")
CLASS_NAMES = st.sampled_from(
    [
        *CALLBACKS,
        "Normal",
        "NoSuchCallback",
        "",
        ":",
        "Scale:",
        ":Scale",
        "torchbend.callbacks.affine:Scale",
        "torchbend.callbacks.affine:Scale.__init__",
        "torch.nn:Linear",
        "builtins:object",
        "os:system",
        "torch:_inductor.config",
        "torch:_dynamo.eval_frame",
        "torch:onnx.export",
        *(f"{m}:Thing" for m in UNIMPORTED),
    ]
) | st.text(max_size=12)
ARG_NAMES = st.sampled_from(
    sorted({a for args in ARGS.values() for a in args} | {"callbacks", "fn", "sources"})
) | st.text(max_size=6)
PATTERNS = st.sampled_from(
    [
        "conv_in$",
        "act_in$",
        r"conv_mid\.weight",
        "forward:act_mid$",
        "nothing$",
        "(",
        "[a-",
        "*",
        ".*",
        "",
    ]
) | st.text(max_size=6)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-3, 3)
    | st.floats()
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _callback_dicts(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    value = (
        JSON
        | st.fixed_dictionaries(
            {"control": st.sampled_from(["c0", "c1", "nope"]) | JSON},
            optional={"scale": JSON | st.floats(), "offset": JSON | st.floats()},
        )
        | st.fixed_dictionaries({"tuple": st.lists(JSON, max_size=3) | JSON})
        | st.fixed_dictionaries({"callback": inner})
    )
    return st.fixed_dictionaries(
        {"class": CLASS_NAMES | JSON},
        optional={"args": st.dictionaries(ARG_NAMES, value, max_size=4) | JSON},
    )


CALLBACK_DICTS = st.deferred(
    lambda: st.recursive(_callback_dicts(JSON), _callback_dicts, max_leaves=3)
)
CONTROL_DICTS = st.fixed_dictionaries(
    {"name": st.sampled_from(["c0", "c1", "not an identifier"]) | JSON},
    optional={
        "value": st.floats() | st.integers() | st.booleans() | JSON,
        "range": st.lists(st.floats() | st.integers(), min_size=0, max_size=3) | JSON,
        "clamp": st.booleans() | JSON,
        "ramp": st.integers(-2, 5) | JSON,
    },
)
BENDING_DICTS = st.fixed_dictionaries(
    {"callback": CALLBACK_DICTS | JSON},
    optional={
        "patterns": st.lists(PATTERNS, max_size=3) | JSON,
        "fn": st.sampled_from([None, "forward", ["forward"], "nope", ["forward", "nope"]]) | JSON,
        "keys": st.lists(st.text(max_size=6), max_size=2) | JSON,
    },
)
CONFIG_DICTS = st.fixed_dictionaries(
    {"format": st.just(FORMAT) | JSON, "version": st.just(VERSION) | JSON},
    optional={
        "controls": st.lists(CONTROL_DICTS, max_size=3) | JSON,
        "bendings": st.lists(BENDING_DICTS, max_size=3) | JSON,
    },
)


def named_modules(data: Any) -> set[str]:
    """Every module a ``"module:Class.attr"`` string in ``data`` names (the attributes too:
    they may be submodules). Iterative: ``data`` may nest deeper than Python recurses."""
    found: set[str] = set()
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str) and ":" in item:
            module, _, qualname = item.partition(":")
            parts = qualname.split(".")
            found |= {module} | {".".join([module, *parts[: i + 1]]) for i in range(len(parts))}
    return found


def load_bend_and_call(data: Any) -> None:
    """``data`` loaded as a configuration, applied to a fresh module and called: only
    torchbend's errors may come out, and no module the data names is imported."""
    before = set(sys.modules)
    try:
        config = tb.BendingConfig.from_dict(data)
    except tb.TorchbendError as e:
        note(f"from_dict -> {error_text(e)}")
        return
    finally:
        imported = (set(sys.modules) - before) & named_modules(data)
        assert not imported, f"loading a configuration imported {sorted(imported)}"
    note(f"loaded {config!r}")
    spec = MODELS["conv"]
    bended = tb.BendedModule(pristine("conv"))
    bended.trace(x=make_input(spec, spec.shapes[0], 0))
    try:
        bended.bend(config)
        for shape in spec.shapes[:2]:
            bended(make_input(spec, shape, 1))
    except tb.TorchbendError as e:
        note(f"bend/call -> {error_text(e)}")


@settings(max_examples=examples(120), suppress_health_check=SLOW)
@given(data=JSON | CONFIG_DICTS)
@example(
    data={
        "format": FORMAT,
        "version": VERSION,
        "bendings": [{"callback": {"class": "torch:_inductor.config"}, "patterns": ["x"]}],
    }
)
@example(
    data={
        "format": FORMAT,
        "version": VERSION,
        "bendings": [{"callback": {"class": "Chain"}, "patterns": ["conv_in$"]}],
    }
)
def test_garbage_configs_raise_torchbend_errors_and_import_nothing(data: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        load_bend_and_call(data)


@settings(max_examples=examples(30), suppress_health_check=SLOW)
@given(
    text=st.text(max_size=60)
    | st.binary(max_size=60).map(lambda b: b.decode("latin-1"))
    | st.integers(1, 5000).map(lambda n: "[" * n + "]" * n)
    | CONFIG_DICTS.map(json.dumps),
    raw=st.binary(max_size=40),
    binary=st.booleans(),
)
def test_garbage_config_files_raise_torchbend_errors(text: str, raw: bytes, binary: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        if binary:
            path.write_bytes(raw)
        else:
            path.write_text(text, encoding="utf-8")
        try:
            tb.BendingConfig.load(path)
        except tb.TorchbendError as e:
            note(error_text(e))


def nest(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@settings(max_examples=examples(8), suppress_health_check=SLOW)
@given(
    depth=st.integers(10, 5000),
    where=st.sampled_from(["arg", "tuple", "callback", "patterns", "bendings"]),
)
def test_deeply_nested_configs_raise_torchbend_errors(depth: int, where: str) -> None:
    leaf: Any = nest(depth, 1.0)
    callback: Any = {"class": "Scale", "args": {"scale": leaf}}
    if where == "tuple":
        callback = {"class": "Flip", "args": {"dim": {"tuple": leaf}}}
    elif where == "callback":
        callback = {"class": "Scale"}
        for _ in range(depth):
            callback = {"class": "Chain", "args": {"callbacks": [callback]}}
    bending = {"callback": callback, "patterns": leaf if where == "patterns" else ["conv_in$"]}
    data = {
        "format": FORMAT,
        "version": VERSION,
        "bendings": leaf if where == "bendings" else [bending],
    }
    load_bend_and_call(data)


def paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            found += paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            found += paths(v, (*prefix, i))
    return found


def mutate(data: Any, path: tuple[Any, ...], kind: str, value: Any) -> Any:
    """``data`` with the item at ``path`` replaced by ``value``, deleted, or wrapped in a list."""
    if not path:
        return value if kind == "replace" else [data] if kind == "wrap" else data
    data = copy.deepcopy(data)
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if kind == "delete":
        del parent[key]
    elif kind == "wrap":
        parent[key] = [parent[key]]
    else:
        parent[key] = value
    return data


ODD_VALUES: st.SearchStrategy[Any] = st.sampled_from(
    [
        None,
        True,
        -1,
        0,
        2**70,
        -(2**70),
        1e308,
        -1e308,
        math.nan,
        math.inf,
        -math.inf,
        "1",
        "",
        [],
        {},
        [1, 2],
    ]
)


@settings(max_examples=examples(50), suppress_health_check=SLOW)
@given(
    bends=st.lists(st.tuples(specs(), st.integers(0, 10**6)), min_size=1, max_size=3),
    mutations=st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.sampled_from(["replace", "replace", "delete", "wrap"]),
            ODD_VALUES | CLASS_NAMES | JSON,
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_mutated_valid_configs_raise_torchbend_errors_and_import_nothing(
    bends: list[tuple[Spec, int]], mutations: list[tuple[int, str, Any]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner("conv", Path(tmp))
    for spec, index in bends:
        targets = runner.targets()
        target = targets[index % len(targets)]
        try:
            runner.bended.bend(runner.build(spec, target), target.pattern)
        except tb.BendingError:
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = runner.bended.bending_config().to_dict()
        for index, kind, value in mutations:
            found = paths(data)
            path = found[index % len(found)]
            note(f"{kind} {path} with {value!r}")
            data = mutate(data, path, kind, value)
        load_bend_and_call(data)


LAZY = ("torch:_inductor.config", "torch:_dynamo.eval_frame", "torch:onnx.export", "this:Thing")


def test_configs_naming_lazily_imported_modules_import_nothing() -> None:
    """Torch imports some of its submodules when they are first looked up as attributes: a
    configuration naming one must not import it. Run in a fresh interpreter, where none is."""
    code = textwrap.dedent(
        f"""
        import json, sys
        import torchbend as tb
        imported = {{}}
        for name in {list(LAZY)!r}:
            module = name.replace(":", ".").rsplit(".", 1)[0]
            before = module in sys.modules
            data = {{"format": {FORMAT!r}, "version": {VERSION!r},
                     "bendings": [{{"callback": {{"class": name}}, "patterns": ["x"]}}]}}
            try:
                tb.BendingConfig.from_dict(data)
            except tb.TorchbendError:
                pass
            imported[name] = not before and module in sys.modules
        print(json.dumps(imported))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert not any(imported.values()), f"loading a configuration imported modules: {imported}"


# -- controls beyond the bounds of the arguments they drive ----------------------------------------


def declared_bounds(cls: str, arg: str) -> tuple[float, float]:
    declaration = getattr(getattr(tb, cls), arg)
    low = -math.inf if declaration.low is None else declaration.low
    high = math.inf if declaration.high is None else declaration.high
    return low, high


BOUNDED = sorted(
    (cls, arg)
    for cls, args in ARGS.items()
    for arg, num in args.items()
    if isinstance(num, Num)
    and num.kind is not bool
    and declared_bounds(cls, arg) != (-math.inf, math.inf)
)
VIEWS = st.sampled_from([(1.0, 0.0), (2.0, 0.0), (-1.0, 0.0), (1.0, -0.5), (0.5, 0.25)])


@settings(max_examples=examples(25), suppress_health_check=SLOW)
@given(
    which=st.sampled_from(BOUNDED),
    data=st.data(),
    view=VIEWS,
    clamp=st.booleans(),
    index=st.integers(0, 10**6),
    export=st.integers(0, 3).map(lambda i: i == 0),
)
def test_control_values_beyond_an_arguments_bounds_are_refused_or_clamped(
    which: tuple[str, str],
    data: st.DataObject,
    view: tuple[float, float],
    clamp: bool,
    index: int,
    export: bool,
) -> None:
    """A control value that would put an argument out of its declared bounds is refused (the
    control keeps its value) or, with ``clamp=True``, brought into the bounds: in Python and in
    a TorchScript export alike; accepted values reach the argument exactly."""
    cls, arg = which
    num = ARGS[cls][arg]
    assert isinstance(num, Num)
    low, high = declared_bounds(cls, arg)
    spec = data.draw(callback_specs((cls,), control=0.0), label="callback")
    if spec.args.get("seed", 0) is None:
        spec.args["seed"] = 0  # the same draws in the module compared with
    start = spec.args[arg]
    if start is None or num.kind is int:
        view = (1.0, 0.0)  # int arguments take whole values: no views
    if start is None:
        start = num.kind(num.low)
    scale, offset = view
    value = num.kind((start - offset) / scale) if num.kind is int else (start - offset) / scale
    # The control's range: the argument's values drawn, and 2 beyond, through the view.
    ends = [(num.low - 2 - offset) / scale, (num.high + 2 - offset) / scale, value]
    wide = (num.kind(math.floor(min(ends))), num.kind(math.ceil(max(ends))))
    control = tb.BendingParameter("c", value, range=wide, clamp=clamp)
    source = control if view == (1.0, 0.0) else control * scale + offset
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner("conv", Path(tmp))
    bended = runner.bended
    targets = runner.targets()
    target = targets[index % len(targets)]
    callback = getattr(tb, cls)(**{**spec.args, arg: source})
    note(f"bend {callback!r} ({arg} = {scale} * c + {offset}) on {target.key}")
    try:
        bended.bend(callback, target.pattern)
    except tb.BendingError as e:
        note(f"  -> {error_text(e)}")
        return
    x = runner.input(0, 0)
    updates = data.draw(
        st.lists(
            st.integers(int(wide[0]), int(wide[1])) if num.kind is int else st.floats(*wide),
            min_size=1,
            max_size=3,
        ),
        label="updates",
    )
    for u in updates:
        effective = u * scale + offset if view != (1.0, 0.0) else u
        inside = low <= effective <= high
        before, held = control.get(), getattr(callback, arg)
        try:
            bended.update("c", u, ramp=False)
        except tb.BendingError as e:
            note(f"update({u!r}) -> {error_text(e)}")
            assert not inside and not clamp, f"update({u!r}) refused: {arg} = {effective} is valid"
            assert control.get() == before, "a refused value changed the control"
            assert getattr(callback, arg) == held, "a refused value reached the argument"
            continue
        assert inside or clamp, f"update({u!r}) accepted: {arg} = {effective} is out of bounds"
        expected = num.kind(min(max(effective, low), high))
        assert getattr(callback, arg) == expected, (
            f"{arg} is {getattr(callback, arg)!r}, not {expected!r}"
        )
    direct = tb.BendedModule(pristine("conv"))
    direct.trace(x=runner.input(0, 0))
    direct.bend(getattr(tb, cls)(**{**spec.args, arg: getattr(callback, arg)}), target.pattern)
    assert_same(bended(x), direct(x), f"{cls} driven by a control != {cls} given its value")
    if not export:
        return
    scripted = tb.export.torchscript(bended)
    u = data.draw(st.floats(*wide), label="exported value")
    if num.kind is int:
        u = round(u)
    effective = u * scale + offset if view != (1.0, 0.0) else u
    inside = low <= effective <= high
    accepted = scripted.set_c(u) == 0
    assert accepted == (inside or clamp), (
        f"exported set_c({u!r}) {'accepted' if accepted else 'refused'} it ({arg} = {effective}, "
        f"bounds [{low}, {high}], clamp={clamp}), which Python "
        f"{'accepts' if inside or clamp else 'refuses'}"
    )
    if accepted:
        bended.update("c", u, ramp=False)
        with torch.no_grad():
            assert_same(scripted(x), bended(x), "exported module after set_c")
