"""Exported controls that derive state again: ``set_<control>`` does what ``update`` does.

Tests of the plan's derived controls (torchbend/export/plan.py), the setters' lines that derive
again (``_derive_source`` in torchbend/export/source.py), the scripted ``control_changed`` of
seeded callbacks (torchbend/callbacks/seeded.py) and their seeds mixed with target names in
TorchScript (``mix_seed`` in torchbend/callbacks/draws.py).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.callbacks import CALLBACKS
from torchbend.callbacks.argument import INT_MAX, INT_MIN, Argument, declared
from torchbend.callbacks.draws import mix_seed, name_crc, target_generator, target_seed
from torchbend.callbacks.seeded import Seeded
from torchbend.engine.shaping import Shaped
from torchbend.errors import ExportError
from torchbend.export import torchscript

ACTIVATION, WEIGHT = "conv$", r"out\.weight"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 8, 3, padding=1)
        self.out = nn.Conv1d(8, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.conv(x)))


def bended_net() -> tuple[tb.BendedModule, torch.Tensor]:
    torch.manual_seed(0)
    bended = tb.BendedModule(Net())
    x = torch.randn(1, 1, 32)
    bended.trace(x=x)
    return bended, x


def bits(x: torch.Tensor) -> torch.Tensor:
    return x.view(torch.int32)


Bend = Callable[[tb.BendedModule, tb.BendingParameter, str], object]


def bend_with(make: Callable[[tb.BendingParameter], tb.BendingCallback]) -> Bend:
    return lambda bended, c, target: bended.bend(make(c), target)


# Each argument declared with derives=True of each seeded callback, bent with a control ``c``
# on it (a Shaped through bend's subset=: its fraction, and its seed).
CASES: dict[tuple[str, str], Bend] = {
    ("Ablate", "fraction"): bend_with(lambda c: tb.Ablate(channels=[0], fraction=c, seed=4)),
    ("Ablate", "seed"): bend_with(lambda c: tb.Ablate(channels=[0], fraction=0.5, seed=c)),
    ("Mask", "prob"): bend_with(lambda c: tb.Mask(c, dim=-2, seed=1)),
    ("Mask", "seed"): bend_with(lambda c: tb.Mask(0.5, seed=c)),
    ("Noise", "seed"): bend_with(lambda c: tb.Noise(0.5, seed=c)),
    ("Offset", "seed"): bend_with(lambda c: tb.Offset(0.5, seed=c)),
    ("Permute", "amount"): bend_with(lambda c: tb.Permute(seed=3, amount=c)),
    ("Permute", "seed"): bend_with(lambda c: tb.Permute(seed=c, amount=0.5)),
    ("Randomize", "fraction"): bend_with(lambda c: tb.Randomize(c, std=1.0, seed=2)),
    ("Randomize", "seed"): bend_with(lambda c: tb.Randomize(0.5, std=1.0, seed=c)),
    ("Unphase", "seed"): bend_with(lambda c: tb.Unphase(0.5, seed=c)),
    ("Shaped", "subset"): lambda bended, c, target: bended.bend(
        tb.Scale(2.0), target, subset=tb.Subset(c, dim=-2, seed=1)
    ),
    ("Shaped", "seed"): lambda bended, c, target: bended.bend(
        tb.Scale(2.0),
        target,
        subset=tb.Subset(0.5, dim=-2, seed=c),  # type: ignore[arg-type]
    ),
}

FRACTIONS = (0.25, [0.75, 0.75, 0.25, 1.0, 0.0, 0.5])
"""The control's first value, then those set after exporting (one twice: nothing changes)."""
SEEDS = (1, [5, 5, 1, -3, INT_MIN, 2**63 - 1024, 1])
"""Seeds as a control gives them: floats, so that the largest is 2**63 - 1024."""


def test_every_derived_argument_of_every_seeded_callback_has_a_case():
    seeded = {name: cls for name, cls in CALLBACKS.items() if issubclass(cls, Seeded)}
    seeded["Shaped"] = Shaped
    derived = {
        (name, arg)
        for name, cls in seeded.items()
        for arg, argument in declared(cls).items()
        if argument.derives
    }
    assert derived == set(CASES)


def outputs(
    bended: tb.BendedModule, exported: list[torch.nn.Module], x: torch.Tensor
) -> torch.Tensor:
    with torch.no_grad():
        expected = bended(x)
        for module in exported:
            assert torch.equal(bits(module(x)), bits(expected))
    return expected


@pytest.mark.parametrize("target", [ACTIVATION, WEIGHT], ids=["activation", "weight"])
@pytest.mark.parametrize("case", sorted(CASES), ids=lambda case: ".".join(case))
def test_set_derives_state_again_as_update_does(case, target, tmp_path):
    _, arg = case
    bended, x = bended_net()
    first, values = SEEDS if arg == "seed" else FRACTIONS
    CASES[case](bended, tb.BendingParameter("c", first), target)
    exported = [torchscript(bended)]
    path = tmp_path / "derived.pt"
    if case == ("Noise", "seed"):  # its generator, which a file cannot hold
        with pytest.raises(ExportError, match=r"torch\.Generator"):
            torchscript(bended, path)
    else:
        torchscript(bended, path)
        exported.append(torch.jit.load(str(path)))
    seen = [outputs(bended, exported, x)]
    for value in values:
        bended.update("c", value)
        for module in exported:
            assert module.set_c(value) == 0
        seen.append(outputs(bended, exported, x))
    assert any(not torch.equal(other, seen[0]) for other in seen[1:]), "c changed nothing"


def test_a_control_on_a_mask_inside_a_shaped_derives_it_again():
    bended, x = bended_net()
    prob = tb.BendingParameter("prob", 0.25)
    bended.bend(tb.Mask(prob, dim=-2, seed=1) >> tb.Scale(2.0), ACTIVATION, blend=0.5)
    scripted = torchscript(bended)
    for value in (0.75, 0.0, 1.0):
        bended.update("prob", value)
        assert scripted.set_prob(value) == 0
        outputs(bended, [scripted], x)


@pytest.mark.parametrize(
    "make",
    [lambda: tb.Noise(std=0.1, seed=3), lambda: tb.Lambda(torch.sin)],
    ids=["Noise", "Lambda"],
)
def test_a_weight_bent_without_controls_is_saved_as_a_constant(make, tmp_path):
    # Neither Noise's generator nor Lambda's Python function reaches the file: the weight is
    # exported bent, and the callback left out.
    bended, x = bended_net()
    with torch.no_grad():
        unbent = bended(x)
    bended.bend(make(), WEIGHT)
    path = tmp_path / "noise.pt"
    scripted = torchscript(bended, path)
    loaded = torch.jit.load(str(path))
    assert not any(name.startswith("tb_callback_") for name, _ in loaded.named_children())
    expected = outputs(bended, [scripted, loaded], x)
    assert not torch.equal(expected, unbent)


def test_a_seeded_noise_inside_a_shaped_bending_activations_is_not_saved(tmp_path):
    bended, _ = bended_net()
    bended.bend(tb.Noise(std=0.1, seed=3), ACTIVATION, blend=0.5)
    with pytest.raises(ExportError, match=r"Noise\(.*torch\.Generator.*seed=None"):
        torchscript(bended, tmp_path / "noise.pt")


# -- seeds mixed with names ---------------------------------------------------------------------


def seeds() -> list[int]:
    edges = [INT_MIN, INT_MIN + 1, -(2**62), -98765, -1, 0, 1, 2**31, 2**32 - 1, 2**62]
    edges += [INT_MAX - 1, INT_MAX]
    draw = random.Random(0)
    return edges + [draw.randint(INT_MIN, INT_MAX) for _ in range(200)]


def test_seeds_mix_with_names_in_torchscript_as_in_python():
    # Every seed a seed Argument takes (64 bits), with CRCs at the ends of their range.
    scripted = torch.jit.script(mix_seed)
    crcs = [0, 1, 2**31, 2**32 - 1, name_crc("forward:conv"), name_crc("out.weight")]
    for seed in seeds():
        for crc in crcs:
            expected = (seed * 0x9E3779B1 + crc) % 2**63
            assert mix_seed(seed, crc) == expected
            assert scripted(seed, crc) == expected, (seed, crc)
    for name in ("forward:conv", "out.weight", "décodeur:x"):  # the formula draws were made by
        seed = 12345
        assert target_seed(seed, name) == (seed * 0x9E3779B1 + zlib.crc32(name.encode())) % 2**63


@pytest.mark.parametrize("seed", [INT_MIN, -1, INT_MAX], ids=["min", "minus_one", "max"])
def test_a_scripted_callback_draws_anew_from_any_seed_as_in_python(seed):
    # Seeds beyond what a control gives, set directly: the scripted draw is Python's.
    mask = tb.Mask(0.5, seed=0)
    mask.register("forward:conv", torch.Size([1, 8, 32]), torch.float32, torch.device("cpu"))
    scripted = torch.jit.script(mask)
    mask.seed = seed
    scripted.seed = seed
    scripted.control_changed()
    assert torch.equal(scripted.state("forward:conv"), mask.state("forward:conv"))
    generator = target_generator(seed, "forward:conv")
    assert torch.equal(
        mask.state("forward:conv"), (torch.rand(1, 8, 32, generator=generator) >= 0.5).float()
    )


# -- what is still refused ----------------------------------------------------------------------


class Level(tb.BendingCallback):
    """A callback that derives state in Python only (not a Seeded one)."""

    level = Argument(float, neutral=0.0, derives=True)

    def __init__(self, level: float | tb.BendingParameter = 0.0) -> None:
        super().__init__()
        self.level = level

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return x + self.level


class Drawing(Seeded):
    """A seeded callback that draws in register_target, as before Seeded.draw."""

    def __init__(self, seed: int | tb.BendingParameter | None = None) -> None:
        super().__init__(seed)

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.add_state(name, torch.rand(shape, generator=target_generator(self.seed, name)))

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return x * self.state(name)


def test_a_control_on_state_derived_in_python_only_is_refused():
    bended, _ = bended_net()
    bended.bend(Level(tb.BendingParameter("level", 0.5)), ACTIVATION)
    with pytest.raises(ExportError, match=r"control 'level' drives level of Level.*Seeded"):
        torchscript(bended)


def test_a_seed_control_of_a_callback_drawing_in_python_only_is_refused():
    bended, x = bended_net()
    seed = tb.BendingParameter("seed", 1)
    bended.bend(Drawing(seed), ACTIVATION)
    with torch.no_grad():
        before = bended(x)
        bended.update("seed", 2)  # in Python, it draws anew (registers its targets again)
        assert not torch.equal(bended(x), before)
        bended.update("seed", 1)
        assert torch.equal(bended(x), before)
    with pytest.raises(ExportError, match=r"drives seed of Drawing.*override Seeded\.draw"):
        torchscript(bended)
