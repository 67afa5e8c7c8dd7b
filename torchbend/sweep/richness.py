"""Bend richness: single bendings of every hidden activation, and whether each changes the sound
beyond a filter and moves what a listener hears."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ..audio.descriptors import character_and_pitch, pitch_shift, pitch_track
from ..audio.quality import loudness_lufs, lti_residual_db
from ..bended import BendedModule
from ..callbacks import Mask, Noise, Permute, Roll, Scale
from ..callbacks.base import BendingCallback
from ..errors import SweepError
from .measure import UNCHANGED_TOLERANCE

__all__ = [
    "BENDINGS",
    "LOUDNESS_RANGE_LU",
    "RESIDUAL_DB",
    "THRESHOLDS",
    "RichnessRender",
    "RichnessSummary",
    "hidden_activations",
    "judge_render",
    "moved_descriptors",
    "normalised_change",
    "reference",
    "richness_sweep",
    "summarise",
]

RESIDUAL_DB = -10.0
"""A change with an LTI residual (:func:`torchbend.audio.quality.lti_residual_db`) at or above
this is more than a filter can explain: a tenth of its energy or more is left once the best
gain per STFT bin is taken out."""

LOUDNESS_RANGE_LU = 6.0
"""A render moves a descriptor perceptibly only within this many LU of the unbent loudness: a
change of level alone (louder, quieter, silent) is not a change of character."""

THRESHOLDS: dict[str, tuple[str, float]] = {
    "centroid_hz": ("ratio", 0.15),
    "pitch_hz": ("semitones", 1.0),
    "hnr_db": ("difference", 3.0),
    "onset_rate": ("ratio", 0.20),
    "loudness_lufs": ("difference", 1.0),
}
"""The smallest perceptible change of each descriptor of :func:`torchbend.audio.descriptors.
describe`: how it is measured and by how much. A centroid 15 % higher or lower, a pitch one
semitone away, a harmonic-to-noise ratio 3 dB away, an onset rate 20 % away (and at least one
onset more or less), a loudness 1 LU away. The loudness is not a character (see
:data:`LOUDNESS_RANGE_LU`); its threshold serves :func:`normalised_change`."""

Factory = Callable[[torch.Tensor], BendingCallback]

BENDINGS: dict[str, Factory] = {
    "Mask(0.3)": lambda act: Mask(prob=0.3, seed=0),
    "Scale(0)": lambda act: Scale(0.0),
    "Scale(2)": lambda act: Scale(2.0),
    "Noise(std/2)": lambda act: Noise(std=0.5 * float(act.float().std()), seed=0),
    "Roll(1 channel)": lambda act: Roll(shift=1 / act.shape[-2], dim=-2),
    "Permute(channels)": lambda act: Permute(dim=-2, seed=0),
}
"""The sweep's single bendings, each built from the activation it bends, measured on the
unbent render (``[batch, channels, time]``): elements zeroed with probability 0.3; the
activation silenced; doubled; Gaussian noise added at half the activation's own standard
deviation (over the whole render, all sounds together), drawn anew each call from seed 0;
the channels rolled by one (channel ``i`` takes channel ``i - 1``'s values); the channels
shuffled (seed 0).

Roll runs along the channels rather than time: a roll along time moves the whole render in
time (a wrap at its end), which says more about the excerpt's length than about the model and
which global descriptors cannot hear; a roll by one channel keeps the activation's values and
time structure and changes only which unit drives what, as a permutation does, but with the
smallest such change."""


def hidden_activations(bended: BendedModule, fn: str = "forward") -> list[str]:
    """The activations of ``fn``'s traced graph but its inputs and the values it returns."""
    graph = bended.graph(fn)
    returned: set[str] = set()
    for node in graph.nodes:
        if node.op == "output":
            torch.fx.node.map_arg(node.args, lambda n: returned.add(n.name))  # type: ignore[func-returns-value]
    inputs = {node.name for node in graph.nodes if node.op == "placeholder"}
    return [
        name for name in bended.activation_names(fn) if name not in returned and name not in inputs
    ]


def normalised_change(name: str, before: float, after: float) -> float:
    """The change of descriptor ``name`` in units of its perceptible threshold
    (:data:`THRESHOLDS`): 1.0 is just perceptible. NaN when either value is not finite
    (an unvoiced pitch, silence)."""
    if not (math.isfinite(before) and math.isfinite(after)):
        return math.nan
    kind, threshold = THRESHOLDS[name]
    if kind == "difference":
        return abs(after - before) / threshold
    if kind == "semitones":
        return abs(12 * math.log2(max(after, 1e-9) / max(before, 1e-9))) / threshold
    if before <= 0.0 or after <= 0.0:
        return math.inf if after != before else 0.0
    return abs(math.log(after / before)) / math.log(1 + threshold)


def moved_descriptors(
    before: Mapping[str, float], after: Mapping[str, float], semitones: float | None = None
) -> tuple[str, ...]:
    """The descriptors (but the loudness) that moved by at least their threshold from
    ``before`` to ``after`` (dicts of :func:`~torchbend.audio.descriptors.describe`). A ratio
    threshold reads ``max(after, before) / min(...)`` against ``1 + threshold`` (so +15 % and
    -13 % both count as a 15 % move of the centroid). ``semitones``, when given, is the
    pitch's move frame by frame (:func:`~torchbend.audio.descriptors.pitch_shift`), read in
    place of the move between the medians."""
    moved = []
    for name in THRESHOLDS:
        if name == "loudness_lufs":
            continue
        change = normalised_change(name, before[name], after[name])
        if name == "pitch_hz" and semitones is not None:
            change = abs(semitones) / THRESHOLDS[name][1] if math.isfinite(semitones) else math.nan
        if name == "onset_rate" and before[name] == after[name]:
            change = 0.0
        if change >= 1.0:
            moved.append(name)
    return tuple(moved)


@dataclass(frozen=True)
class RichnessRender:
    """What one bent render of one sound did, next to the unbent render of that sound."""

    node: str
    """The activation bent."""
    bending: str
    """The bending's label (a key of :data:`BENDINGS`)."""
    sound: str
    """The sound rendered."""
    changed: bool
    """Some sample differs from the unbent render by more than ``UNCHANGED_TOLERANCE``."""
    nonfinite: bool
    """Some sample is NaN or infinite."""
    clipped: bool
    """Some sample reaches 1.0 in magnitude."""
    residual_db: float
    """The LTI residual of the change (NaN when unchanged or not finite)."""
    loudness_lu: float
    """Loudness of the render minus the unbent one's (-inf for silence, NaN if not finite)."""
    moved: tuple[str, ...]
    """The descriptors moved by at least their threshold (only measured for renders that are
    finite, unclipped and within :data:`LOUDNESS_RANGE_LU`: empty otherwise)."""

    @property
    def beyond_filter(self) -> bool:
        """Changed by more than a filter explains (residual at or above :data:`RESIDUAL_DB`)."""
        return self.changed and self.residual_db >= RESIDUAL_DB

    @property
    def perceptible(self) -> bool:
        """Moves a descriptor perceptibly, within :data:`LOUDNESS_RANGE_LU`, finite and
        unclipped."""
        return bool(self.moved)


@dataclass(frozen=True)
class RichnessSummary:
    """Counts over the renders of a sweep."""

    renders: int
    changed: int
    beyond_filter: int
    perceptible: int
    nonfinite: int
    clipped: int

    @property
    def beyond_filter_share(self) -> float:
        """Of the changed renders, the share changed beyond a filter (0 to 1)."""
        return self.beyond_filter / self.changed if self.changed else 0.0

    @property
    def perceptible_share(self) -> float:
        """Of all renders, the share that moves a descriptor perceptibly (0 to 1)."""
        return self.perceptible / self.renders if self.renders else 0.0


def summarise(renders: Sequence[RichnessRender]) -> RichnessSummary:
    """Count ``renders``: changed, beyond a filter, perceptible, non-finite, clipped."""
    return RichnessSummary(
        renders=len(renders),
        changed=sum(r.changed for r in renders),
        beyond_filter=sum(r.beyond_filter for r in renders),
        perceptible=sum(r.perceptible for r in renders),
        nonfinite=sum(r.nonfinite for r in renders),
        clipped=sum(r.clipped for r in renders),
    )


def reference(x: torch.Tensor, rate: int) -> tuple[dict[str, float], torch.Tensor]:
    """What :func:`judge_render` compares a render with: the descriptors of the unbent render
    ``x`` (:func:`~torchbend.audio.descriptors.describe`) and its pitch track, from one run
    of YIN."""
    values, track = character_and_pitch(x, rate)
    return {**values, "loudness_lufs": loudness_lufs(x, rate)}, track


def judge_render(
    node: str,
    bending: str,
    sound: str,
    y: torch.Tensor,
    unbent: torch.Tensor,
    before: Mapping[str, float],
    rate: int,
    pitch: torch.Tensor | None = None,
) -> RichnessRender:
    """Judge render ``y`` of ``sound`` against the unbent render ``unbent`` (both mono,
    lined up), whose descriptors are ``before`` (:func:`~torchbend.audio.descriptors.describe`)
    and pitch track ``pitch`` (:func:`~torchbend.audio.descriptors.pitch_track`; computed
    here if not given); ``node`` and ``bending`` only label the result."""
    nonfinite = not bool(y.isfinite().all())
    changed = nonfinite or float((y - unbent).abs().max()) > UNCHANGED_TOLERANCE
    clipped = bool((y.abs() >= 1.0).any())
    if nonfinite:
        return RichnessRender(node, bending, sound, True, True, clipped, math.nan, math.nan, ())
    residual = lti_residual_db(y, unbent) if changed else math.nan
    loudness = loudness_lufs(y, rate) - before["loudness_lufs"] if changed else 0.0
    moved: tuple[str, ...] = ()
    if changed and not clipped and abs(loudness) <= LOUDNESS_RANGE_LU:
        if pitch is None:
            pitch = pitch_track(unbent, rate)
        after, track = character_and_pitch(y, rate)
        moved = moved_descriptors(before, after, pitch_shift(pitch, track))
    return RichnessRender(node, bending, sound, changed, False, clipped, residual, loudness, moved)


def richness_sweep(
    model: torch.nn.Module,
    sounds: Mapping[str, torch.Tensor],
    rate: int,
    bendings: Mapping[str, Factory] = BENDINGS,
) -> list[RichnessRender]:
    """Render ``sounds`` through ``model`` with each of ``bendings`` on each hidden activation
    of ``forward`` (:func:`hidden_activations`), one bending at a time, offline, and judge
    each render against the unbent one.

    The sounds go through in one batch, ``[sounds, 1, time]``, the batch ``forward`` is
    traced on; every one must have the same length, a length ``model`` takes.

    Args:
        model (Module): a mono audio model, ``[batch, 1, time]`` to ``[batch, 1, time]``.
        sounds (Mapping): name to mono signal ``[time]``.
        rate (int): sample rate in Hz.
        bendings (Mapping): label to a function of the unbent activation giving a callback.

    Returns:
        One :class:`RichnessRender` per activation, bending and sound, in that order.
    """
    lengths = {x.numel() for x in sounds.values()}
    if len(lengths) != 1:
        raise SweepError(
            f"richness_sweep needs sounds of one length, got lengths {sorted(lengths)}"
        )
    names = list(sounds)
    x = torch.stack([sounds[name].reshape(-1) for name in names])[:, None]
    bended = BendedModule(model)
    with torch.inference_mode():
        bended.trace("forward", x=x)
        unbent = bended(x)[:, 0]
        nodes = hidden_activations(bended)
        values = bended.get_activations(*[f"^{n}$" for n in nodes], bended=False, x=x)
    references = {name: reference(unbent[i], rate) for i, name in enumerate(names)}
    renders = []
    for node in nodes:
        for label, factory in bendings.items():
            bended.bend(factory(values[node]), f"^{node}$")
            with torch.inference_mode():
                y = bended(x)[:, 0]
            bended.reset()
            for i, name in enumerate(names):
                before, pitch = references[name]
                renders.append(
                    judge_render(node, label, name, y[i], unbent[i], before, rate, pitch)
                )
    return renders
