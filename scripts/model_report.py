"""Measure the shipped models and write the results into docs/model.md.

Run: python scripts/model_report.py [--write docs/model.md]

Two sections. ``quality``: tiny_rave, the transparent reference, against issue 11's targets.
Offline renders (one call on the whole signal, one thread) of: the shipped sounds; held-out
sounds made by scripts/make_assets.py's generators with a seed never trained on;
test signals it generates (sines from 100 Hz to 2 kHz at -15 dBFS, a steady 110.25 Hz saw,
a chord, digital silence). Renders are compared with their input lined up, the model's
``latency`` (in samples) taken off their start. The measures are torchbend.audio.quality's;
the spectral distance is printed next to calibration rows (the input itself at -3 dB, with
noise at -60 dB, with an 11025 Hz tone at -40 dBFS) so that the number means something.

``character``: tiny_rave and tiny_ddsp side by side against issue 28's targets (see
:func:`character` in scripts/character_report.py): reconstruction, bend richness with its
calibration rows, and the named latent channels. Each row says whether its target holds, and
the script ends by naming any target missed.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from torchbend import models
from torchbend.audio import load
from torchbend.audio import quality as q

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import make_assets  # noqa: E402  (a sibling script: the sound makers)

RATE = 44100
HELD_OUT_SEED = 20261123


def sounds() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The shipped sounds and held-out ones, mono ``[time]`` at 44.1 kHz."""
    shipped = {
        p.stem: load(p, sample_rate=RATE, mono=True)[0][0]
        for p in sorted((ROOT / "assets/sounds").glob("*.wav"))
    }
    rng = np.random.default_rng(HELD_OUT_SEED)
    held = {
        f"{name} (held out)": torch.from_numpy(
            make_assets.normalize(make_assets.GENERATORS[name](4.0, rng))
        ).float()
        for name in ("drums", "bass", "pad", "voices", "plucks", "chords", "bowed")
    }
    return shipped, held


def renderer(model: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """Offline render of ``[time]`` audio, cut to a multiple of the model's ratio and with the
    model's latency (its ``latency`` attribute, in samples) taken off the start."""
    ratio = int(getattr(model, "ratio", 1))
    latency = int(getattr(model, "latency", 0))

    def render(x: torch.Tensor) -> torch.Tensor:
        n = x.numel() // ratio * ratio
        with torch.inference_mode():
            return model(x[None, None, :n])[0, 0, latency:]

    return render


def _cut(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The input lined up with its render ``y``."""
    return x[: y.numel()]


def measure(model: torch.nn.Module) -> tuple[list[str], list[str]]:
    """The report's Markdown lines, and the names of the measures that miss their target."""
    render = renderer(model)
    ratio = int(getattr(model, "ratio", 1))
    bands = int(getattr(model, "bands", 1))
    lines = ["### Sounds", ""]
    lines += [
        "| sound | loudness in (LUFS) | out (LUFS) | difference (LU) | within 1 LU | DC in "
        "| DC out | error (dB re input) | spectral distance |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    failed: list[str] = []
    shipped, held = sounds()
    worst = 0.0
    for name, x in {**shipped, **held}.items():
        y = render(x)
        x = _cut(x, y)
        a, b = q.loudness_lufs(x, RATE), q.loudness_lufs(y, RATE)
        worst = max(worst, abs(b - a))
        lines.append(
            f"| {name} | {a:.1f} | {b:.1f} | {b - a:+.1f} | {'yes' if abs(b - a) <= 1 else 'no'} "
            f"| {q.dc(x):+.4f} | {q.dc(y):+.4f} | {q.error_db(y, x):.1f} "
            f"| {q.spectral_distance(y, x):.2f} |"
        )
    lines += ["", "### Calibration of the spectral distance (on the shipped sounds)", ""]
    lines += ["| degradation of the input | spectral distance |", "|---|---|"]
    noise = torch.Generator().manual_seed(0)
    for label, damage in [
        ("the input itself at -3 dB", lambda x: x * 10 ** (-3 / 20)),
        (
            "the input plus white noise at -60 dBFS",
            lambda x: x + 10 ** (-60 / 20) * torch.randn(x.numel(), generator=noise),
        ),
        (
            "the input plus an 11025 Hz tone at -40 dBFS",
            lambda x: x + q.sine(11025, x.numel() / RATE + 1, RATE, -40)[: x.numel()],
        ),
    ]:
        scores = [q.spectral_distance(damage(x), x) for x in shipped.values()]
        lines.append(f"| {label} | {sum(scores) / len(scores):.2f} |")

    lines += ["", "### Test signals", ""]
    lines += ["| measure | value | target | holds |", "|---|---|---|---|"]

    def row(name: str, value: float, target: str, holds: bool, unit: str = "dB") -> None:
        shown = f"{value:+.5f}" if unit == "" else f"{value:.1f} {unit}"
        lines.append(f"| {name} | {shown} | {target} | {'yes' if holds else 'no'} |")
        if not holds:
            failed.append(name)

    for freq in (100.0, 220.0, 440.0, 1000.0, 2000.0):
        x = q.sine(freq, 2.0, RATE)
        y = render(x)
        gain = q.tone_gain_db(y, _cut(x, y), freq, RATE)
        row(f"gain of a {freq:.0f} Hz sine at -15 dBFS", gain, "within ±6 dB", abs(gain) <= 6)
    saw_in = 0.3 * (2 * (torch.arange(4 * RATE) % 400).float() / 400 - 1)
    contrast = q.harmonic_contrast_db(render(saw_in), 110.25, RATE)
    row(
        "110.25 Hz saw: power on harmonics over between", contrast, "at least 20 dB", contrast >= 20
    )
    chord = sum(q.sine(f, 6.0, RATE, -20) for f in (233.0, 311.0, 467.0))
    y = render(chord)
    periods = {bands: "band count", 2 * bands: "twice the band count: the band centres"}
    periods.setdefault(ratio, "compression ratio")
    for period, what in periods.items():
        level = q.locked_lines_db(y, _cut(chord, y), period)
        row(
            f"lines locked to the sample index mod {period} ({what}), chord in, re input RMS",
            level,
            "below -60 dB",
            level < -60,
        )
    silence = render(torch.zeros(2 * RATE))
    level = q.level_dbfs(silence)
    row("digital silence in: level out", level, "at most -70 dBFS", level <= -70, "dBFS")
    offset = q.dc(silence)
    row("digital silence in: DC out", offset, "below 1e-3", abs(offset) < 1e-3, "")
    row("worst loudness difference on the sounds", worst, "at most 1 LU", worst <= 1, "LU")
    return lines, failed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny-rave", type=Path, help="tiny_rave's weights (default: shipped)")
    parser.add_argument("--tiny-ddsp", type=Path, help="tiny_ddsp's weights (default: shipped)")
    parser.add_argument("--write", type=Path, help="Markdown file with the two sections")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    loaded = {
        "tiny_rave": models.load("tiny_rave", args.tiny_rave),
        "tiny_ddsp": models.load("tiny_ddsp", args.tiny_ddsp),
    }
    header = [
        f"Measured by `python scripts/model_report.py --write docs/model.md` on "
        f"{platform.machine()} ({platform.python_implementation()} "
        f"{platform.python_version()}, torch {torch.__version__}), model `tiny_rave`.",
        "",
    ]
    lines, failed = measure(loaded["tiny_rave"])
    lines = header + lines
    from character_report import character

    character_lines, character_failed = character(loaded)
    print("\n".join([*lines, "", *character_lines]))
    failed += character_failed
    if failed:
        print(f"\nmissed targets: {', '.join(failed)}")
    if args.write:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from bench_call import write_section

        write_section(args.write, "quality", lines)
        write_section(args.write, "character", character_lines)


if __name__ == "__main__":
    main()
