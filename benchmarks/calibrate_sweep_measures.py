"""What the measures and flags of a sweep (``torchbend.sweep.measure``) read on known damage.

Run: python benchmarks/calibrate_sweep_measures.py [--write docs/sweeps.md]

Each shipped sound (assets/sounds/*.wav, loaded at 44.1 kHz, mono) is taken as the unbent
render and damaged in known ways (a copy, gains, added white noise at an SNR, a brick-wall
low-pass, an offset, silence, NaNs, a delay); each damaged sound is measured against the sound.
Printed: a Markdown table with, per damage, the mean over the sounds of each measure (the
distance with its range), and the flags raised (on how many sounds); then the descriptor
effects (``torchbend.sweep.effects``) of each damage, in perceptible steps. Also timed:
``measure`` on each sound (4 s) against a copy at -6 dB, and ``effects`` (what a sweep adds to
each render's measures when it takes effects), on one thread, the median of a few rounds.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from bench_call import cpu_name, write_section

from torchbend.audio import load
from torchbend.audio.perceptual import PRIMARY
from torchbend.sweep.effects import PREFIX, describe, effects
from torchbend.sweep.measure import (
    CLIP_LEVEL,
    CLIPPING_FRACTION,
    DC_LIMIT,
    FLAGS,
    FLOOR_DB,
    MEASURES,
    SILENT_DBFS,
    UNCHANGED_TOLERANCE,
    measure,
)

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_RATE = 44100
SECTION = "sweep-calibration"
ROUNDS = 21


def _noise_at(x: torch.Tensor, snr_db: float, seed: int) -> torch.Tensor:
    """``x`` plus white noise whose power is ``snr_db`` below that of ``x``."""
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed))
    scale = math.sqrt(float(x.double().pow(2).mean()) / 10 ** (snr_db / 10))
    return x + scale * noise


def _lowpass(x: torch.Tensor, cutoff: float) -> torch.Tensor:
    """``x`` with every FFT bin above ``cutoff`` Hz set to zero (a brick wall)."""
    spectrum = torch.fft.rfft(x.double(), dim=-1)
    freqs = torch.fft.rfftfreq(x.shape[-1], 1 / SAMPLE_RATE)
    spectrum[..., freqs > cutoff] = 0
    return torch.fft.irfft(spectrum, n=x.shape[-1], dim=-1).float()


def _nans(x: torch.Tensor, share: float, seed: int) -> torch.Tensor:
    y = x.clone()
    where = torch.randperm(y.shape[-1], generator=torch.Generator().manual_seed(seed))
    y[..., where[: int(share * y.shape[-1])]] = math.nan
    return y


def _delay(x: torch.Tensor, samples: int) -> torch.Tensor:
    return torch.nn.functional.pad(x, (samples, 0))[..., : x.shape[-1]]


DAMAGES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "identical copy": lambda x: x.clone(),
    "gain -6 dB": lambda x: x * 10 ** (-6 / 20),
    "gain +12 dB (clips)": lambda x: x * 10 ** (12 / 20),
    "white noise, 20 dB SNR": lambda x: _noise_at(x, 20.0, seed=1),
    "white noise, 0 dB SNR": lambda x: _noise_at(x, 0.0, seed=2),
    "low-pass at 2 kHz (FFT brick wall)": lambda x: _lowpass(x, 2000.0),
    "DC offset 0.1": lambda x: x + 0.1,
    "silence": torch.zeros_like,
    "NaN in 1 % of samples": lambda x: _nans(x, 0.01, seed=3),
    "delay of 100 samples": lambda x: _delay(x, 100),
}
"""Each known damage, applied to a sound ``[1, time]``."""

FORMATS = {
    "loudness_lufs": "{:.1f}",
    "peak_dbfs": "{:.1f}",
    "rms_dbfs": "{:.1f}",
    "dc": "{:.3f}",
    "centroid_hz": "{:.0f}",
    "flatness": "{:.3f}",
    "bandwidth_hz": "{:.0f}",
}


Result = tuple[dict[str, float], dict[str, bool], dict[str, float]]
"""A damaged sound's measures, flags, and what the flags look at: the share of samples at
full scale (``clipped``) and the largest difference from the sound (``change``)."""


def measure_damages(sounds: dict[str, torch.Tensor]) -> dict[str, dict[str, Result]]:
    """Every damage of :data:`DAMAGES` on every sound, measured against the sound."""
    results: dict[str, dict[str, Result]] = {}
    for name, damage in DAMAGES.items():
        results[name] = {}
        for sound, x in sounds.items():
            y = damage(x)
            values, flags = measure(y, SAMPLE_RATE, x)
            clean = torch.nan_to_num(y, nan=0.0)
            extras = {
                "clipped": float((clean.abs() >= CLIP_LEVEL).double().mean()),
                "change": float((clean - x).abs().max()),
            }
            results[name][sound] = values, flags, extras
    return results


def table(results: dict[str, dict[str, Result]]) -> list[str]:
    """The Markdown table of the measures of every damage, mean over the sounds."""
    header = [*MEASURES[:-1], "distance (min-max)", "flags raised (sounds)"]
    lines = [
        "| damage | " + " | ".join(header) + " |",
        "|---|" + "---:|" * (len(header) - 1) + "---|",
    ]
    for name, per_sound in results.items():
        rows = list(per_sound.values())
        cells = [
            FORMATS[key].format(statistics.fmean(values[key] for values, _, _ in rows))
            for key in MEASURES[:-1]
        ]
        distances = [values["distance"] for values, _, _ in rows]
        cells.append(
            f"{statistics.fmean(distances):.3f} ({min(distances):.3f}-{max(distances):.3f})"
        )
        raised = {flag: sum(flags[flag] for _, flags, _ in rows) for flag in FLAGS}
        cells.append(
            ", ".join(f"{flag} ({n}/{len(rows)})" for flag, n in raised.items() if n) or "none"
        )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def effects_table(sounds: dict[str, torch.Tensor]) -> list[str]:
    """The Markdown table of the primary descriptors' effects of every damage: the mean over
    the sounds where the effect is defined (on how many, when not on all)."""
    header = [f"`{PREFIX}{name}`" for name in PRIMARY]
    lines = [
        "| damage | " + " | ".join(header) + " |",
        "|---|" + "---:|" * len(header),
    ]
    unbent = {sound: describe(x, SAMPLE_RATE) for sound, x in sounds.items()}
    for name, damage in DAMAGES.items():
        moved = [effects(damage(x), SAMPLE_RATE, unbent[sound]) for sound, x in sounds.items()]
        cells = []
        for descriptor in PRIMARY:
            values = [m[PREFIX + descriptor] for m in moved]
            defined = [v for v in values if v is not None]
            cell = f"{statistics.fmean(defined):+.2f}" if defined else "undefined"
            if defined and len(defined) < len(values):
                cell += f" ({len(defined)}/{len(values)})"
            cells.append(cell)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def margins(results: dict[str, dict[str, Result]]) -> list[str]:
    """How far from each threshold the damages fall, as sentences."""

    def measured(names: list[str], key: str) -> list[float]:
        return [values[key] for name in names for values, _, _ in results[name].values()]

    def shares(names: list[str]) -> list[float]:
        return [extras["clipped"] for name in names for _, _, extras in results[name].values()]

    sounding = [name for name in DAMAGES if name not in ("silence", "NaN in 1 % of samples")]
    levels = measured(sounding, "rms_dbfs")
    offsets = [abs(v) for v in measured([n for n in sounding if n != "DC offset 0.1"], "dc")]
    mild = [n for n in sounding if n not in ("gain +12 dB (clips)", "white noise, 0 dB SNR")]
    clipped = shares(["gain +12 dB (clips)"])
    noisy = shares(["white noise, 0 dB SNR"])
    gain = sorted(
        (values["distance"], sound) for sound, (values, _, _) in results["gain -6 dB"].items()
    )
    change, changed = min(
        (extras["change"], f"{name} on {sound}")
        for name in DAMAGES
        if name != "identical copy"
        for sound, (_, _, extras) in results[name].items()
    )
    return [
        f"Thresholds (`torchbend/sweep/measure.py`) and how far these damages fall from them: "
        f"**silent** below {SILENT_DBFS:.0f} dB RMS (re a full-scale sine): every damage but "
        f"silence reads {min(levels):.1f} to {max(levels):.1f} dB ({min(levels) - SILENT_DBFS:.0f} "
        f"dB above the threshold at the quietest), silence {FLOOR_DB:.0f}. "
        f"**clipping** when more than {100 * CLIPPING_FRACTION:.1f} % of the samples reach "
        f"{CLIP_LEVEL:.1f}: the mild damages clip at most "
        f"{100 * max(shares(mild)):.3f} %, a +12 dB gain "
        f"{100 * min(clipped):.1f} to {100 * max(clipped):.1f} % (noise at 0 dB SNR, "
        f"{100 * min(noisy):.2f} to {100 * max(noisy):.2f} %). **dc** when the offset passes "
        f"{DC_LIMIT}: the sounds and their other damages hold at most {max(offsets):.4f}, the "
        f"offset of 0.1 reads 0.1. **unchanged** within {UNCHANGED_TOLERANCE:g} of the unbent "
        f"render on every sample: the damage closest to a copy, {changed} (which holds "
        f"little above 2 kHz), still differs by up to {change:.2g}.",
        "",
        f"The distance depends on the sound as much as on the damage (see its range): bins "
        f"more than 80 dB under the unbent render's loudest read no difference, so a sound "
        f"with few bins above that floor moves less for the same damage (a -6 dB gain reads "
        f"{gain[0][0]:.3f} on {gain[0][1]}, {gain[-1][0]:.3f} on {gain[-1][1]}), and energy "
        f"where the unbent render had none (noise; NaNs, read as zeros, which click) moves it "
        f"most. Compare distances between renders of one sound, not across sounds.",
    ]


def timing(
    sounds: dict[str, torch.Tensor], call: Callable[[torch.Tensor, torch.Tensor], object]
) -> tuple[float, float]:
    """Median and spread (min, max of the per-sound medians) of ``call(render, sound)`` on
    each sound and a copy of it at -6 dB, in ms."""
    medians = []
    for x in sounds.values():
        quieter = x * 0.5
        call(quieter, x)
        times = []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            call(quieter, x)
            times.append(time.perf_counter() - start)
        medians.append(1000 * statistics.median(times))
    return statistics.median(medians), max(medians) - min(medians)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--write", type=Path, help=f"a Markdown file with a '{SECTION}' section to rewrite"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    paths = sorted((ROOT / "assets" / "sounds").glob("*.wav"))
    sounds = {path.stem: load(path, sample_rate=SAMPLE_RATE, mono=True)[0] for path in paths}
    seconds = statistics.fmean(x.shape[-1] / SAMPLE_RATE for x in sounds.values())
    results = measure_damages(sounds)
    median, spread = timing(sounds, lambda y, x: measure(y, SAMPLE_RATE, x))
    described = {id(x): describe(x, SAMPLE_RATE) for x in sounds.values()}
    added, added_spread = timing(sounds, lambda y, x: effects(y, SAMPLE_RATE, described[id(x)]))
    lines = [
        f"Written by `python benchmarks/calibrate_sweep_measures.py --write docs/sweeps.md`: "
        f"each of the {len(sounds)} shipped sounds ({', '.join(sounds)}; {seconds:.1f} s, "
        f"44.1 kHz, mono) is the unbent render, damaged in a known way and measured against "
        f"itself; each cell is the mean over the sounds.",
        "",
        *table(results),
        "",
        *margins(results),
        "",
        f"One `measure` call on {seconds:.0f} s of audio takes {median:.1f} ms (median of "
        f"{ROUNDS} calls on each sound, their medians {spread:.1f} ms apart) on one thread of "
        f"{cpu_name()} ({platform.machine()}, {os.cpu_count()} cores), torch "
        f"{torch.__version__}. Taking its descriptor effects (describing the render, once "
        f"more, and comparing; the unbent render is described once per input) adds "
        f"{added:.1f} ms ({added_spread:.1f} ms apart), {100 * added / median:.0f} % of the "
        f'measures\' time: `"effects": false` in a specification leaves them out.',
        "",
        "The descriptor effects of the same damages (`torchbend.sweep.effects`, in perceptible "
        "steps: 1 LU of loudness, a centroid 15 % away, a semitone, 3 dB of harmonic-to-noise "
        "ratio), the mean over the sounds where the effect is defined:",
        "",
        *effects_table(sounds),
    ]
    print("\n".join(lines))
    if args.write is not None:
        write_section(args.write, SECTION, lines)


if __name__ == "__main__":
    main()
