"""Synthesize the example sounds in assets/sounds/ (a drum loop, a bass line, a pad, a sung line
and a bowed line) and
the varied sounds the shipped model trains on.

Run: python scripts/make_assets.py [--out assets/sounds] [--seconds 4]

Everything is made in code with numpy (no samples are read), seeded, so the files are the same
on every run and platform up to float rounding. Writes mono, 44.1 kHz, 16-bit WAV files.
:func:`training_sounds` makes the training set of scripts/train_model.py: these three at other
seeds plus tones, chords, sweeps, plucks, noises, formant-like voices and bowed tones with vibrato
at varied levels.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
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


def _midi_hz(midi: float) -> float:
    return 440.0 * 2 ** ((midi - 69) / 12)


def _harmonics(phase: np.ndarray, f0: np.ndarray | float, amps: list[float]) -> np.ndarray:
    """Sum of harmonics ``k * phase`` with amplitudes ``amps``, each dropped above 20 kHz."""
    out = np.zeros_like(phase)
    for k, a in enumerate(amps, start=1):
        out += a * np.sin(k * phase) * (np.asarray(f0) * k < 20000)
    return out


def _one_after_another(
    seconds: float,
    rng: np.random.Generator,
    event: Callable[[np.random.Generator], np.ndarray],
    gap: tuple[float, float] | None = None,
) -> np.ndarray:
    """``seconds`` of events made by ``event(rng)`` placed one after another, with a random
    silence of ``gap`` seconds (low, high) after each if given."""
    n = int(seconds * SAMPLE_RATE)
    out, start = np.zeros(n), 0
    while start < n:
        piece = event(rng)
        _place(out, piece, start / SAMPLE_RATE)
        start += len(piece) + (int(rng.uniform(*gap) * SAMPLE_RATE) if gap else 0)
    return out


def _tone(rng: np.random.Generator) -> np.ndarray:
    length = int(rng.uniform(0.2, 1.5) * SAMPLE_RATE)
    t = _time(length)
    f0 = float(np.exp(rng.uniform(np.log(40), np.log(4000))))
    shape = rng.integers(3)
    count = 1 if shape == 0 else 40
    amps = [1.0 / k if shape == 1 or k % 2 else 0.0 for k in range(1, count + 1)]
    note = _harmonics(2 * np.pi * f0 * t + rng.uniform(0, 2 * np.pi), f0, amps)
    env = np.minimum(t / rng.uniform(0.001, 0.1), 1) * np.minimum(
        (length - 1 - np.arange(length)) / 200, 1
    )
    return note * env * 10 ** rng.uniform(-1.5, 0)


def tones(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Held notes of sines, saws and squares (band-limited) from 40 Hz to 4 kHz."""
    return _one_after_another(seconds, rng, _tone)


def _chord(rng: np.random.Generator) -> np.ndarray:
    length = int(rng.uniform(0.5, 2.0) * SAMPLE_RATE)
    t = _time(length)
    root = rng.uniform(36, 72)
    chord = np.zeros(length)
    for interval in rng.choice([0, 3, 4, 7, 10, 11, 12, 14, 16, 19], rng.integers(3, 6)):
        f0 = _midi_hz(root + interval) * (1 + rng.normal(0, 0.002))
        amps = list(rng.uniform(0, 1, 8) / np.arange(1, 9))
        chord += _harmonics(2 * np.pi * f0 * t + rng.uniform(0, 2 * np.pi), f0, amps)
    return chord * np.minimum(t / rng.uniform(0.01, 0.4), 1) * np.exp(-t / rng.uniform(0.3, 5))


def chords(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Chords of three to five harmonic notes, soft attacks, some detuned."""
    return _one_after_another(seconds, rng, _chord)


def _sweep(rng: np.random.Generator) -> np.ndarray:
    length = int(rng.uniform(0.5, 2.0) * SAMPLE_RATE)
    a, b = np.exp(rng.uniform(np.log(30), np.log(18000), 2))
    freq = a * (b / a) ** (np.arange(length) / length)
    phase = 2 * np.pi * np.cumsum(freq) / SAMPLE_RATE
    amps = [1.0] if rng.random() < 0.5 else [1.0 / k for k in range(1, 20)]
    return _harmonics(phase, freq, amps) * 10 ** rng.uniform(-1.5, 0)


def sweeps(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Exponential sine and saw sweeps, up or down, between 30 Hz and 18 kHz."""
    return _one_after_another(seconds, rng, _sweep)


def plucks(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Plucked strings: harmonics that decay faster the higher they are, random notes."""
    n = int(seconds * SAMPLE_RATE)
    out = np.zeros(n)
    step = rng.uniform(0.08, 0.3)
    for i in range(int(seconds / step)):
        t = _time(int(rng.uniform(0.3, 1.2) * SAMPLE_RATE))
        f0 = _midi_hz(rng.uniform(40, 88))
        decay = rng.uniform(0.2, 1.0)
        note = np.zeros_like(t)
        for k in range(1, 30):
            if f0 * k < 20000:
                note += np.sin(2 * np.pi * f0 * k * t) / k * np.exp(-t * k / decay)
        _place(out, note * 10 ** rng.uniform(-1, 0), i * step)
    return out


def _noise(rng: np.random.Generator) -> np.ndarray:
    length = int(rng.uniform(0.05, 1.0) * SAMPLE_RATE)
    noise = rng.standard_normal(length)
    spectrum = np.fft.rfft(noise)
    freqs = np.fft.rfftfreq(length, 1 / SAMPLE_RATE) + 1.0
    tilt = rng.uniform(-1.0, 0.5)  # slope of the amplitude in octaves
    spectrum *= (freqs / 1000.0) ** tilt
    noise = np.fft.irfft(spectrum, length)
    noise /= np.abs(noise).max() + 1e-9
    t = _time(length)
    env = np.minimum(t / rng.uniform(0.001, 0.2), 1) * np.exp(-t / rng.uniform(0.02, 1))
    return 0.5 * noise * env * 10 ** rng.uniform(-1.5, 0)


def noises(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Bursts of white, pink-ish, low- and high-passed noise with varied envelopes."""
    return _one_after_another(seconds, rng, _noise, gap=(0.0, 0.2))


FORMANTS = {  # vowel: formant frequencies (Hz) and bandwidths, roughly an adult voice
    "a": ([800, 1150, 2900], [80, 90, 120]),
    "e": ([400, 1600, 2700], [60, 80, 120]),
    "i": ([300, 2300, 3000], [50, 100, 120]),
    "o": ([450, 800, 2830], [70, 80, 100]),
    "u": ([325, 700, 2530], [50, 60, 170]),
}


def _voice(rng: np.random.Generator) -> np.ndarray:
    length = int(rng.uniform(0.4, 1.5) * SAMPLE_RATE)
    t = _time(length)
    f0 = _midi_hz(rng.uniform(45, 72))
    freq = f0 * (1 + 0.01 * np.sin(2 * np.pi * rng.uniform(4, 7) * t))
    phase = 2 * np.pi * np.cumsum(freq) / SAMPLE_RATE
    centres, widths = FORMANTS[str(rng.choice(list(FORMANTS)))]
    note = np.zeros(length)
    for k in range(1, int(8000 / f0)):
        gain = sum(1 / (1 + ((k * f0 - c) / w) ** 2) for c, w in zip(centres, widths, strict=True))
        note += (gain + 0.02) / k**0.5 * np.sin(k * phase)
    return note * np.minimum(t / 0.05, 1) * np.minimum((length - 1 - np.arange(length)) / 2000, 1)


def voices(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Sung vowels: a glottal-like harmonic source with vibrato, shaped by formant peaks."""
    return _one_after_another(seconds, rng, _voice, gap=(0.0, 0.3))


def _bowed(
    rng: np.random.Generator, midi: float | None = None, seconds: float | None = None
) -> np.ndarray:
    length = int((seconds or rng.uniform(0.6, 2.0)) * SAMPLE_RATE)
    t = _time(length)
    f0 = _midi_hz(rng.uniform(36, 84) if midi is None else midi)
    rate, depth = rng.uniform(4.5, 6.5), rng.uniform(0.003, 0.012)
    onset = np.minimum(t / 0.4, 1)  # the vibrato grows in after the attack
    freq = f0 * (1 + depth * onset * np.sin(2 * np.pi * rate * t))
    phase = 2 * np.pi * np.cumsum(freq) / SAMPLE_RATE + rng.uniform(0, 2 * np.pi)
    brightness = rng.uniform(0.8, 1.6)  # how slowly the harmonics fall off
    note = _harmonics(phase, freq, [1.0 / k**brightness for k in range(1, 40)])
    rosin = rng.standard_normal(length) * 0.02 * (1 + np.sin(phase))  # bow noise, per cycle
    swell = np.minimum(t / rng.uniform(0.05, 0.3), 1)
    release = np.minimum((length - 1 - np.arange(length)) / (0.1 * SAMPLE_RATE), 1)
    return (note + rosin) * swell * release * 10 ** rng.uniform(-1, 0)


def bowed(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Bowed strings: saw-like tones with vibrato that grows after the attack, and bow noise."""
    return _one_after_another(seconds, rng, _bowed, gap=(0.0, 0.2))


def cello(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A bowed line in a low register: one note after another, vibrato and bow noise."""
    out = np.zeros(int(seconds * SAMPLE_RATE))
    notes = [43, 47, 50, 55, 53, 50, 48, 47]  # MIDI numbers, G major-ish
    step = seconds / len(notes)
    for i, midi in enumerate(notes):
        _place(out, _bowed(rng, midi, step * 0.97), i * step)
    return out


def voice(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A sung line: vowels (formants) with vibrato, one note after another on a minor scale."""
    out = np.zeros(int(seconds * SAMPLE_RATE))
    notes = [57, 60, 62, 64, 62, 60, 55, 57]  # MIDI numbers, A minor-ish
    step = seconds / len(notes)
    vowels = list(FORMANTS)
    for i, midi in enumerate(notes):
        _place(out, _sung(rng, midi, vowels[i % len(vowels)], step * 0.95), i * step)
    return out


def _sung(rng: np.random.Generator, midi: float, vowel: str, seconds: float) -> np.ndarray:
    length = int(seconds * SAMPLE_RATE)
    t = _time(length)
    f0 = _midi_hz(midi)
    freq = f0 * (1 + 0.012 * np.minimum(t / 0.3, 1) * np.sin(2 * np.pi * rng.uniform(5, 6) * t))
    phase = 2 * np.pi * np.cumsum(freq) / SAMPLE_RATE
    centres, widths = FORMANTS[vowel]
    note = np.zeros(length)
    for k in range(1, int(10000 / f0)):
        gain = sum(1 / (1 + ((k * f0 - c) / w) ** 2) for c, w in zip(centres, widths, strict=True))
        note += (gain + 0.02) / k**0.5 * np.sin(k * phase)
    breath = rng.standard_normal(length) * 0.01
    env = np.minimum(t / 0.06, 1) * np.minimum((length - 1 - np.arange(length)) / 3000, 1)
    return (note + breath) * env


GENERATORS = {
    "drums": drums,
    "bass": bass,
    "pad": pad,
    "tones": tones,
    "chords": chords,
    "sweeps": sweeps,
    "plucks": plucks,
    "noises": noises,
    "voices": voices,
    "bowed": bowed,
    "voice": voice,
    "cello": cello,
}
"""Every sound maker: ``make(seconds, rng)`` gives mono float64 audio at 44.1 kHz."""


def training_sounds(seconds: float, seed: int) -> dict[str, np.ndarray]:
    """``seconds`` of each generator's sound, made with ``seed`` (another than the shipped
    sounds'), each normalized to a peak between -20 and -1 dBFS."""
    rng = np.random.default_rng(seed)
    return {
        name: normalize(make(seconds, rng), 10 ** (rng.uniform(-20, -1) / 20))
        for name, make in GENERATORS.items()
    }


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
    shipped = [("drums", drums), ("bass", bass), ("pad", pad), ("voice", voice), ("cello", cello)]
    for name, make in shipped:
        audio = normalize(make(args.seconds, rng))
        path = args.out / f"{name}.wav"
        sf.write(path, audio.astype(np.float32), SAMPLE_RATE, subtype="PCM_16")
        print(f"wrote {path} ({len(audio) / SAMPLE_RATE:.1f} s)")


if __name__ == "__main__":
    main()
