"""Synthesize the example sounds in assets/sounds/: a drum loop, a bass line and a pad.

Run: python scripts/make_assets.py [--out assets/sounds] [--seconds 4]

Everything is made in code with numpy (no samples are read), seeded, so the files are the same
on every run and platform up to float rounding. Writes mono, 44.1 kHz, 16-bit WAV files.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import soundfile as sf

SAMPLE_RATE = 44100
TEMPO = 120.0  # beats per minute: a 16th note is 0.125 s
SEED = 0


def _time(n: int) -> np.ndarray:
    return np.arange(n) / SAMPLE_RATE


def _place(out: np.ndarray, hit: np.ndarray, start_s: float) -> None:
    """Add ``hit`` into ``out`` starting at ``start_s`` seconds (clipped at the end)."""
    i = round(start_s * SAMPLE_RATE)
    n = min(len(hit), len(out) - i)
    if n > 0:
        out[i : i + n] += hit[:n]


def kick(rng: np.random.Generator) -> np.ndarray:
    """A sine with a falling pitch (150 Hz to 45 Hz) and a short click."""
    t = _time(int(0.45 * SAMPLE_RATE))
    freq = 45.0 + 105.0 * np.exp(-t / 0.04)
    phase = 2 * np.pi * np.cumsum(freq) / SAMPLE_RATE
    body = np.sin(phase) * np.exp(-t / 0.18)
    click = rng.standard_normal(len(t)) * np.exp(-t / 0.002) * 0.3
    return 0.9 * (body + click)


def snare(rng: np.random.Generator) -> np.ndarray:
    """Two damped tones (185 Hz, 330 Hz) and band-limited noise."""
    t = _time(int(0.3 * SAMPLE_RATE))
    tone = (np.sin(2 * np.pi * 185 * t) + 0.5 * np.sin(2 * np.pi * 330 * t)) * np.exp(-t / 0.05)
    noise = rng.standard_normal(len(t))
    noise = noise - np.convolve(noise, np.ones(8) / 8, mode="same")  # crude high-pass
    return 0.35 * tone + 0.5 * noise * np.exp(-t / 0.08)


def hat(rng: np.random.Generator, open_: bool = False) -> np.ndarray:
    """High-passed noise with a short (closed) or longer (open) decay."""
    t = _time(int((0.25 if open_ else 0.06) * SAMPLE_RATE))
    noise = rng.standard_normal(len(t))
    noise = np.diff(noise, prepend=0.0)  # first difference: tilts the noise towards the top
    return 0.12 * noise * np.exp(-t / (0.08 if open_ else 0.012))


def drums(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A two-bar rock pattern on 16th notes: kick, snare on 2 and 4, hats on every 8th."""
    out = np.zeros(int(seconds * SAMPLE_RATE))
    step = 60.0 / TEMPO / 4
    kicks = {0, 6, 8, 10}
    for i in range(int(seconds / step)):
        s = i % 16
        if s in kicks:
            _place(out, kick(rng), i * step)
        if s in (4, 12):
            _place(out, snare(rng), i * step)
        if s % 2 == 0:
            _place(out, hat(rng, open_=s == 14), i * step)
    return out


def bass(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A plucked saw bass (8th notes) through a decaying one-pole low-pass."""
    out = np.zeros(int(seconds * SAMPLE_RATE))
    step = 60.0 / TEMPO / 2
    notes = [36, 36, 48, 36, 39, 39, 43, 41]  # MIDI numbers, C minor-ish
    for i in range(int(seconds / step)):
        midi = notes[i % len(notes)] + (12 if rng.random() < 0.1 else 0)
        f0 = 440.0 * 2 ** ((midi - 69) / 12)
        t = _time(int(step * 0.9 * SAMPLE_RATE))
        saw = 2 * ((f0 * t) % 1.0) - 1
        # Filter cutoff falls with the note: a one-pole low-pass with a time-varying coefficient.
        cutoff = 150.0 + 2500.0 * np.exp(-t / 0.06)
        a = np.exp(-2 * np.pi * cutoff / SAMPLE_RATE)
        y = np.empty_like(saw)
        acc = 0.0
        for n in range(len(saw)):
            acc = (1 - a[n]) * saw[n] + a[n] * acc
            y[n] = acc
        env = np.minimum(t / 0.003, 1.0) * np.exp(-t / 0.25)
        _place(out, 0.6 * y * env, i * step)
    return out


def pad(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Slow chords of detuned sines with a soft attack, two chords per 4 s."""
    n = int(seconds * SAMPLE_RATE)
    t = _time(n)
    out = np.zeros(n)
    chords = [[60, 63, 67, 70], [58, 62, 65, 69]]
    length = seconds / 2
    for c, chord in enumerate(chords):
        env = np.clip((t - c * length) / 0.4, 0, 1) * np.clip((c + 1) * length - t, 0, 0.3) / 0.3
        for midi in chord:
            f0 = 440.0 * 2 ** ((midi - 69) / 12)
            for detune in (-0.004, 0.0, 0.004):
                phase = rng.uniform(0, 2 * np.pi)
                f = f0 * (1 + detune)
                out += env * (np.sin(2 * np.pi * f * t + phase) + 0.3 * np.sin(4 * np.pi * f * t))
    return out


def normalize(x: np.ndarray, peak: float = 0.8) -> np.ndarray:
    """Scale to the given peak amplitude."""
    return x * (peak / max(np.abs(x).max(), 1e-9))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "assets/sounds")
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    for name, make in [("drums", drums), ("bass", bass), ("pad", pad)]:
        audio = normalize(make(args.seconds, rng))
        path = args.out / f"{name}.wav"
        sf.write(path, audio.astype(np.float32), SAMPLE_RATE, subtype="PCM_16")
        print(f"wrote {path} ({len(audio) / SAMPLE_RATE:.1f} s)")


if __name__ == "__main__":
    main()
