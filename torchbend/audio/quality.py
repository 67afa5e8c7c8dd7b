"""Measures of how faithfully a model renders audio: loudness, offsets, lines locked to the
sample index, tones and harmonics, a multi-resolution spectral distance, and how much of a
change no filter explains (the LTI residual).

Each measure takes mono signals as 1-D tensors (or anything that flattens to one) at a sample
rate, and gives a plain number in the unit its name says. They are what
``scripts/model_report.py`` writes into docs/model.md and what the quality test of the shipped
model asserts; ``tests/audio/test_quality.py`` calibrates each on known degradations.
"""

from __future__ import annotations

import math

import torch

from ..errors import AudioError

__all__ = [
    "dc",
    "error_db",
    "harmonic_contrast_db",
    "level_dbfs",
    "locked_lines_db",
    "loudness_lufs",
    "lti_residual_db",
    "sine",
    "spectral_distance",
    "tone_gain_db",
]

_TINY = 1e-20


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.detach().reshape(-1).double()


def sine(freq: float, seconds: float, rate: int, dbfs: float = -15.0) -> torch.Tensor:
    """A sine of ``freq`` Hz whose RMS is ``dbfs`` dB below a full-scale sine's."""
    t = torch.arange(int(seconds * rate), dtype=torch.float64) / rate
    return (10 ** (dbfs / 20) * torch.sin(2 * math.pi * freq * t)).float()


def level_dbfs(x: torch.Tensor) -> float:
    """RMS level in dB re a full-scale sine (a full-scale sine reads 0 dB)."""
    rms = float(_flat(x).pow(2).mean().sqrt())
    return 20 * math.log10(max(rms * math.sqrt(2), 1e-12))


def dc(x: torch.Tensor) -> float:
    """The mean of the signal (its offset)."""
    return float(_flat(x).mean())


def error_db(y: torch.Tensor, x: torch.Tensor) -> float:
    """Power of ``y - x`` in dB relative to the power of ``x`` (both lined up, same length):
    -20 for a copy with a tenth of it added, -inf for an exact copy. It sees every
    difference, a delay or a phase change included: line the signals up first."""
    a, b = _flat(x), _flat(y)
    error = float((b - a).pow(2).mean())
    if error == 0.0:
        return -math.inf
    return 10 * math.log10(error / (float(a.pow(2).mean()) + _TINY))


def _k_weighting(freqs: torch.Tensor, rate: int) -> torch.Tensor:
    """Power response of BS.1770's K-weighting (a high shelf of about +4 dB above 1.5 kHz and
    a high-pass at about 38 Hz), from its two analogue prototypes through the bilinear
    transform at ``rate``."""
    w = torch.tan(math.pi * freqs.clamp(max=rate / 2 - 1) / rate)  # prewarped frequency

    def biquad_power(f0: float, q: float, gain_db: float, kind: str) -> torch.Tensor:
        k = math.tan(math.pi * f0 / rate)
        s2 = (w / k) ** 2  # |s|^2 on the prewarped axis, normalised to f0
        if kind == "highpass":
            return s2**2 / ((1 - s2) ** 2 + s2 / q**2)
        g = 10 ** (gain_db / 20)
        # high shelf: H(s) = (g s^2 + sqrt(g) s / q + 1) / (s^2 + s / q + 1)
        num = (1 - g * s2) ** 2 + g * s2 / q**2
        den = (1 - s2) ** 2 + s2 / q**2
        return num / den

    return biquad_power(1681.97, 0.7072, 3.9998, "shelf") * biquad_power(
        38.135, 0.5003, 0.0, "highpass"
    )


def loudness_lufs(x: torch.Tensor, rate: int) -> float:
    """Integrated loudness in LUFS, BS.1770-style: K-weighted mean square in 400 ms blocks
    overlapping by 75%, gated at -70 LUFS and then 10 LU below the mean of the blocks kept.
    (The K-weighting is applied to each block's spectrum, which differs from filtering the
    whole signal by a few hundredths of a LU.) Signals shorter than a block are one block."""
    y = _flat(x)
    size, hop = int(0.4 * rate), int(0.1 * rate)
    if y.numel() < size:
        y = torch.nn.functional.pad(y, (0, size - y.numel()))
    blocks = y.unfold(0, size, hop)
    spectrum = torch.fft.rfft(blocks, dim=-1).abs().pow(2)
    weights = _k_weighting(torch.fft.rfftfreq(size, 1 / rate, dtype=torch.float64), rate)
    spectrum[:, 1:] *= 2  # both sides of the spectrum but DC and Nyquist
    spectrum[:, -1] /= 2 if size % 2 == 0 else 1
    power = (spectrum * weights).sum(-1) / size**2  # Parseval: the mean square
    block_lufs = -0.691 + 10 * torch.log10(power + _TINY)
    kept = power[block_lufs > -70]
    if kept.numel() == 0:
        return -math.inf
    relative = -0.691 + 10 * math.log10(float(kept.mean())) - 10
    kept = power[(block_lufs > -70) & (block_lufs > relative)]
    return -0.691 + 10 * math.log10(float(kept.mean()) + _TINY)


def locked_lines_db(y: torch.Tensor, x: torch.Tensor, period: int) -> float:
    """Power of what repeats every ``period`` samples in ``y`` (lines at multiples of
    rate / period, phase-locked to the sample index), in dB relative to the RMS of ``x``.

    The synchronous average of ``y`` over whole periods keeps such lines and averages the
    rest down by the number of periods; its own offset is left out (see :func:`dc`). Use an
    ``x`` that repeats at no such period (tones not on those lines) and long enough: a noise
    floor of about ``-10 log10(periods)`` dB limits what can be seen."""
    signal = _flat(y)
    periods = signal.numel() // period
    if periods < 2:
        raise AudioError(f"need at least two periods of {period} samples, got {signal.numel()}")
    average = signal[: periods * period].reshape(periods, period).mean(0)
    line = (average - average.mean()).pow(2).mean()
    return 10 * math.log10(float(line) / (float(_flat(x).pow(2).mean()) + _TINY) + _TINY)


def _coefficient(y: torch.Tensor, freq: float, rate: int) -> float:
    """Amplitude of the component of ``y`` at ``freq`` (projection on sine and cosine)."""
    t = torch.arange(y.numel(), dtype=torch.float64) / rate
    phase = 2 * math.pi * freq * t
    c = (y * torch.cos(phase)).mean() * 2
    s = (y * torch.sin(phase)).mean() * 2
    return float(torch.sqrt(c * c + s * s))


def tone_gain_db(y: torch.Tensor, x: torch.Tensor, freq: float, rate: int) -> float:
    """Gain in dB at ``freq`` from ``x`` to ``y`` (both holding a tone at ``freq``), measured
    on whole cycles after the first tenth of the signal (past the model's start-up)."""
    a, b = _flat(x), _flat(y)
    start = a.numel() // 10
    cycles = int((a.numel() - start) * freq / rate)
    end = start + int(cycles * rate / freq)
    reference = max(_coefficient(a[start:end], freq, rate), 1e-12)
    gain = _coefficient(b[start:end], freq, rate) / reference
    return 20 * math.log10(max(gain, 1e-12))


def harmonic_contrast_db(y: torch.Tensor, f0: float, rate: int, top: float = 10000.0) -> float:
    """Power on the harmonics of ``f0`` over the power between them, in dB, below ``top`` Hz.

    A Blackman-Harris-windowed spectrum of the whole signal (side lobes 92 dB down); a
    harmonic owns the bins within 4 bins of it (the window's main lobe), the rest up to
    ``top`` is between harmonics. A steady tone
    rendered the same every cycle gives a high contrast; one rendered differently each cycle
    (a comb, noise, jitter) spreads power between its harmonics."""
    signal = _flat(y)
    signal = signal[signal.numel() // 10 :]
    phase = 2 * math.pi * torch.arange(signal.numel(), dtype=torch.float64) / signal.numel()
    window = 0.35875 - 0.48829 * phase.cos() + 0.14128 * (2 * phase).cos()
    window -= 0.01168 * (3 * phase).cos()
    power = torch.fft.rfft(signal * window).abs().pow(2)
    freqs = torch.fft.rfftfreq(signal.numel(), 1 / rate, dtype=torch.float64)
    band = (freqs > f0 / 2) & (freqs < top)
    nearest = (freqs / f0).round().clamp(min=1) * f0
    width = 4 * rate / signal.numel()
    on = band & ((freqs - nearest).abs() <= width)
    off = band & ~on
    return 10 * math.log10(float(power[on].sum()) / (float(power[off].sum()) + _TINY) + _TINY)


def spectral_distance(
    y: torch.Tensor, x: torch.Tensor, sizes: tuple[int, ...] = (2048, 1024, 512, 256)
) -> float:
    """Mean absolute difference of log magnitudes (natural log) over STFTs of several sizes
    (hop a quarter, Hann window), with a floor 80 dB below the loudest bin of ``x`` so that
    near-silent bins do not dominate. 0 for identical signals; report it next to calibration
    rows (docs/model.md) for it to mean something."""
    a, b = _flat(x), _flat(y)
    n = min(a.numel(), b.numel())
    a, b = a[:n], b[:n]
    total = 0.0
    for size in sizes:
        window = torch.hann_window(size, dtype=torch.float64)
        sa = torch.stft(a, size, size // 4, window=window, return_complex=True).abs()
        sb = torch.stft(b, size, size // 4, window=window, return_complex=True).abs()
        floor = float(sa.max()) * 1e-4 + 1e-12
        total += float((torch.log(sa + floor) - torch.log(sb + floor)).abs().mean())
    return total / len(sizes)


def lti_residual_db(bent: torch.Tensor, unbent: torch.Tensor, size: int = 2048) -> float:
    """How much of the change from ``unbent`` to ``bent`` no filter explains, in dB.

    Both signals go through an STFT (Hann window of ``size`` samples, hop ``size // 4``); the
    best complex gain per bin from ``unbent`` to ``bent`` over the whole signal, ``G_k =
    sum_t B conj(U) / sum_t |U|^2``, is what a linear time-invariant filter (an EQ, a short
    delay, a phase change) can do at most; the residual ``B - G U`` is what it cannot. The
    result is the residual's energy relative to the energy of the change ``B - U``: very low
    (-25 dB and below) when the bent signal is a filtered copy, near 0 dB when the change is
    not a filter (a new pitch, new noise, a change over time), -inf when nothing changed or
    the residual is exactly 0 (a gain, silence).

    Args:
        bent (Tensor): the changed signal, mono (flattened).
        unbent (Tensor): the reference, mono, lined up with ``bent`` (same length).
        size (int): STFT frame in samples: a filter whose response is much shorter than it
            is a gain per bin.

    >>> x = torch.randn(44100, generator=torch.Generator().manual_seed(0))
    >>> lti_residual_db(0.5 * x, x) < -100
    True
    """
    # In float32: the ratio needs no more, and a sweep judges hundreds of renders.
    b, u = bent.detach().reshape(-1).float(), unbent.detach().reshape(-1).float()
    if b.numel() != u.numel():
        raise AudioError(
            f"bent and unbent must have the same length, got {b.numel()} and {u.numel()}"
        )
    window = torch.hann_window(size)
    sb = torch.stft(b, size, size // 4, window=window, return_complex=True)
    su = torch.stft(u, size, size // 4, window=window, return_complex=True)

    def energy(z: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(z).pow(2).sum(-1)

    gain = (sb * su.conj()).sum(-1, keepdim=True) / (energy(su).sum(-1, keepdim=True) + _TINY)
    residual = float(energy(sb - gain * su).sum())
    change = float(energy(sb - su).sum())
    if change == 0.0 or residual == 0.0:
        return -math.inf
    return 10 * math.log10(residual / change)
