"""The character section of docs/model.md: tiny_rave and tiny_ddsp side by side (issue 28).

Called by scripts/model_report.py (``--write docs/model.md``); tests/models/test_character.py
asserts its targets against the shipped weights and compares its lines with the doc.

- Reconstruction: the loudness of each shipped and held-out sound out of each model, re the
  input (tiny_ddsp's target: within 2 LU); the pitch error of tiny_ddsp on monophonic inputs
  (median over frames voiced in both of |cents| between the YIN tracks of input and output,
  lined up; target: 50 cents); for tiny_ddsp, lines locked to the sample index at its hop
  and twice it on a steady sine, silence and DC.
- Bend richness (torchbend.sweep.richness): the fixed sweep of single bendings on every
  hidden activation of ``forward``, on the first :data:`RICHNESS_SECONDS` of each shipped
  sound (one batch), with calibration rows (the same judgement of known changes).
- The named latent channels (torchbend.sweep.latent_check) of tiny_ddsp, walked over their
  ranges on the first :data:`LATENT_SECONDS` of bass, cello and voice (the monophonic shipped
  sounds: a chord has no one pitch).
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

from torchbend.audio import quality as q
from torchbend.audio import resample
from torchbend.audio.descriptors import pitch_track
from torchbend.sweep.latent_check import CHANNEL_DESCRIPTORS, latent_walks
from torchbend.sweep.richness import (
    BENDINGS,
    RichnessRender,
    judge_render,
    reference,
    richness_sweep,
    summarise,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import model_report  # noqa: E402  (a sibling script)
from model_report import renderer  # noqa: E402

sounds = functools.cache(model_report.sounds)
"""The shipped and held-out sounds, made once (the held-out ones take seconds to make)."""

RATE = 44100
TARGET = "tiny_ddsp"
"""The model with character, whose targets are asserted; tiny_rave is reported next to it."""
RICHNESS_SECONDS = 1.0
LATENT_SECONDS = 1.0
LATENT_SOUNDS = ("bass", "cello", "voice")
MONOPHONIC = (
    "bass",
    "cello",
    "voice",
    "bass (held out)",
    "voices (held out)",
    "plucks (held out)",
    "bowed (held out)",
)
LOUDNESS_LU = 2.0
PITCH_CENTS = 50.0
BEYOND_FILTER_SHARE = 0.6
PERCEPTIBLE_SHARE = 0.4


def _excerpt(x: torch.Tensor, seconds: float, ratio: int = 256) -> torch.Tensor:
    """The first ``seconds`` of ``x``, cut to a multiple of ``ratio`` samples."""
    return x[: int(seconds * RATE) // ratio * ratio]


def pitch_error_cents(y: torch.Tensor, x: torch.Tensor) -> float:
    """Median over the frames voiced in both of ``|1200 log2(f_y / f_x)|`` (YIN tracks of the
    lined-up signals); NaN when no frame is voiced in both."""
    a, b = pitch_track(x[: y.numel()], RATE), pitch_track(y, RATE)
    both = ~(a.isnan() | b.isnan())
    if not bool(both.any()):
        return math.nan
    return float((1200 * torch.log2(b[both] / a[both])).abs().median())


def _mark(holds: bool) -> str:
    return "yes" if holds else "no"


def reconstruction(models: Mapping[str, torch.nn.Module]) -> tuple[list[str], list[str]]:
    """Loudness of each sound out of each model and tiny_ddsp's pitch error on monophonic
    inputs; the names of the rows whose target is missed."""
    names = list(models)
    renders = {name: renderer(model) for name, model in models.items()}
    lines = [
        "### Reconstruction",
        "",
        "| sound | loudness in (LUFS) | "
        + " | ".join(f"{n} out - in (LU)" for n in names)
        + f" | {TARGET} within {LOUDNESS_LU:.0f} LU | {TARGET} pitch error (cents) "
        f"| within {PITCH_CENTS:.0f} cents |",
        "|---|---|" + "---|" * len(names) + "---|---|---|",
    ]
    failed = []
    shipped, held = sounds()
    for sound, x in {**shipped, **held}.items():
        cells, target_ok, pitch = [], True, math.nan
        loudness_in = q.loudness_lufs(x, RATE)
        for name in names:
            y = renders[name](x)
            difference = q.loudness_lufs(y, RATE) - q.loudness_lufs(x[: y.numel()], RATE)
            cells.append(f"{difference:+.1f}")
            if name == TARGET:
                target_ok = abs(difference) <= LOUDNESS_LU
                pitch = pitch_error_cents(y, x) if sound in MONOPHONIC else math.nan
        pitch_ok = sound not in MONOPHONIC or pitch <= PITCH_CENTS
        if not target_ok:
            failed.append(f"{TARGET} loudness of {sound}")
        if not pitch_ok:
            failed.append(f"{TARGET} pitch of {sound}")
        pitch_cells = (
            f"{pitch:.0f} | {_mark(pitch_ok)}" if sound in MONOPHONIC else "(not monophonic) | "
        )
        lines.append(
            f"| {sound} | {loudness_in:.1f} | {' | '.join(cells)} | {_mark(target_ok)} "
            f"| {pitch_cells} |"
        )
    return lines, failed


def signal_checks(model: torch.nn.Module) -> tuple[list[str], list[str]]:
    """Lines locked to the hop and twice it on a steady sine, silence in, DC out."""
    render = renderer(model)
    hop = int(getattr(model, "ratio", 256))
    lines = [
        "",
        f"### Test signals ({TARGET})",
        "",
        "| measure | value | target | holds |",
        "|---|---|---|---|",
    ]
    failed = []
    # A steady sine of 233 Hz at -15 dBFS for 24 s: the output's harmonics of 233 Hz stay
    # at least 1.1 Hz from every multiple of rate / hop and rate / (2 hop) up to 10 kHz (the
    # 17th is the nearest), so over 24 s (26 cycles of that difference) they average out;
    # the rest of the output (its noise) averages down by the number of periods, which sets
    # the floor.
    tone = q.sine(233.0, 24.0, RATE)
    y = render(tone)
    x = tone[: y.numel()]
    for period in (hop, 2 * hop):
        level = q.locked_lines_db(y, x, period)
        # The same average over one, two and three samples more: no line locked to the hop
        # adds up there, so what it reads is the floor this output leaves.
        floor = sorted(q.locked_lines_db(y, x, period + k) for k in (1, 2, 3))[1]
        name = f"lines locked to the sample index mod {period}, 233 Hz sine in, re input RMS"
        lines.append(
            f"| {name} (the measure's floor on this output: {floor:.0f} dB) "
            f"| {level:.1f} dB | below -60 dB | {_mark(level < -60)} |"
        )
        if level >= -60:
            failed.append(f"{TARGET} {name}")
    silence = render(torch.zeros(2 * RATE))
    level, offset = q.level_dbfs(silence), q.dc(silence)
    lines.append(
        f"| digital silence in: level out | {level:.1f} dBFS | at most -70 dBFS "
        f"| {_mark(level <= -70)} |"
    )
    lines.append(
        f"| digital silence in: DC out | {offset:+.5f} | below 1e-3 | {_mark(abs(offset) < 1e-3)} |"
    )
    if level > -70:
        failed.append(f"{TARGET} silence level")
    if abs(offset) >= 1e-3:
        failed.append(f"{TARGET} silence DC")
    return lines, failed


def _shipped_excerpts(seconds: float, only: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
    shipped, _ = sounds()
    return {k: _excerpt(v, seconds) for k, v in shipped.items() if not only or k in only}


def _calibration_changes() -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """Known changes of a sound (given the excerpt and the whole sound): label to change."""
    noise = torch.Generator().manual_seed(0)

    def tilt(x: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
        spectrum = torch.fft.rfft(x.double())
        freqs = torch.fft.rfftfreq(x.numel(), 1 / RATE, dtype=torch.float64)
        return torch.fft.irfft(spectrum * (freqs.clamp_min(50) / 1000) ** 0.25, x.numel()).float()

    def semitone(x: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
        longer = whole[: int(x.numel() * 2 ** (1 / 12)) + 64]
        return resample(longer[None], RATE, round(RATE / 2 ** (1 / 12)))[0, : x.numel()]

    def noisy(x: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
        n = torch.randn(x.numel(), generator=noise)
        return x + n * float(x.pow(2).mean().sqrt()) * 0.1

    return {
        "an EQ: +1.5 dB per octave (a tilt through 0 dB at 1 kHz)": tilt,
        "a semitone up (resampled by 2^(1/12))": semitone,
        "white noise added 20 dB below the sound": noisy,
        "a gain of -6 dB": lambda x, whole: x * 0.5,
    }


def calibration() -> list[str]:
    """What the richness judgement says of known changes of the shipped excerpts."""
    shipped, _ = sounds()
    excerpts = _shipped_excerpts(RICHNESS_SECONDS)
    lines = [
        "",
        "### Calibration of the richness measures (on the same excerpts)",
        "",
        "| change | LTI residual (dB), per sound | loudness (LU), per sound "
        "| descriptors moved, per sound | beyond a filter | perceptible |",
        "|---|---|---|---|---|---|",
    ]
    references = {k: reference(x, RATE) for k, x in excerpts.items()}
    for label, change in _calibration_changes().items():
        judged = []
        for k, x in excerpts.items():
            before, pitch = references[k]
            judged.append(
                judge_render("-", label, k, change(x, shipped[k]), x, before, RATE, pitch)
            )
        residuals = ", ".join(f"{r.residual_db:.0f}" for r in judged)
        loudness = ", ".join(f"{r.loudness_lu:+.1f}" for r in judged)
        moved = "; ".join(f"{r.sound}: {', '.join(r.moved) or 'none'}" for r in judged)
        lines.append(
            f"| {label} | {residuals} | {loudness} | {moved} "
            f"| {sum(r.beyond_filter for r in judged)}/{len(judged)} "
            f"| {sum(r.perceptible for r in judged)}/{len(judged)} |"
        )
    return lines


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "-"


def richness(models: Mapping[str, torch.nn.Module]) -> tuple[list[str], list[str]]:
    """The sweep's summary per model and per bending; the names of missed targets."""
    excerpts = _shipped_excerpts(RICHNESS_SECONDS)
    results: dict[str, list[RichnessRender]] = {
        name: richness_sweep(model, excerpts, RATE) for name, model in models.items()
    }
    lines = [
        "",
        "### Bend richness",
        "",
        "| model | hidden activations | renders | changed | beyond a filter (of changed) "
        "| perceptible (of all) | clipped | NaN |",
        "|---|---|---|---|---|---|---|---|",
    ]
    failed = []
    for name, renders in results.items():
        s = summarise(renders)
        nodes = len({r.node for r in renders})
        lines.append(
            f"| {name} | {nodes} | {s.renders} | {s.changed} "
            f"| {s.beyond_filter} ({_percent(s.beyond_filter, s.changed)}) "
            f"| {s.perceptible} ({_percent(s.perceptible, s.renders)}) | {s.clipped} "
            f"| {s.nonfinite} |"
        )
        if name == TARGET and s.beyond_filter_share < BEYOND_FILTER_SHARE:
            failed.append(f"{TARGET} renders beyond a filter")
        if name == TARGET and s.perceptible_share < PERCEPTIBLE_SHARE:
            failed.append(f"{TARGET} perceptible renders")
    lines += [
        "",
        "| bending | "
        + " | ".join(f"{n}: beyond a filter | {n}: perceptible" for n in results)
        + " |",
        "|---|" + "---|---|" * len(results),
    ]
    for label in BENDINGS:
        cells = []
        for renders in results.values():
            s = summarise([r for r in renders if r.bending == label])
            cells.append(
                f"{_percent(s.beyond_filter, s.changed)} | {_percent(s.perceptible, s.renders)}"
            )
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return lines, failed


def latent(model: torch.nn.Module) -> tuple[list[str], list[str]]:
    """The walk of each named channel on three shipped sounds; the names of missed targets."""
    walks = latent_walks(model, _shipped_excerpts(LATENT_SECONDS, LATENT_SOUNDS), RATE)
    lines = [
        "",
        f"### Named latent channels ({TARGET})",
        "",
        "| channel | descriptor | sound | values | descriptor over the walk | Spearman "
        "| own effect (thresholds) | largest other effect | holds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    failed = []
    for w in walks:
        own = w.descriptors[w.descriptor]
        other, effect = w.strongest_other
        lines.append(
            f"| {w.channel} | {w.descriptor} | {w.sound} | {w.values[0]:g} to {w.values[-1]:g} "
            f"| {own[0]:.1f} to {own[-1]:.1f} | {w.rho:+.2f} | {w.effect(w.descriptor):.1f} "
            f"| {other}: {effect:.1f} | {_mark(w.holds)} |"
        )
        if not w.holds:
            failed.append(f"{TARGET} latent {w.channel} on {w.sound}")
    named = sorted({w.channel for w in walks}, key=list(CHANNEL_DESCRIPTORS).index)
    lines += ["", f"Channels walked: {', '.join(named)}."]
    return lines, failed


def character(models: Mapping[str, torch.nn.Module]) -> tuple[list[str], list[str]]:
    """The section's lines, and the names of the targets ``models[TARGET]`` misses."""
    import platform

    lines = [
        f"Measured by `python scripts/model_report.py --write docs/model.md` on "
        f"{platform.machine()} ({platform.python_implementation()} "
        f"{platform.python_version()}, torch {torch.__version__}), models "
        f"{', '.join(f'`{n}`' for n in models)}.",
        "",
    ]
    failed: list[str] = []
    for part in (
        reconstruction(models),
        signal_checks(models[TARGET]),
        (calibration(), []),
        richness(models),
        latent(models[TARGET]),
    ):
        lines += part[0]
        failed += part[1]
    return lines, failed
