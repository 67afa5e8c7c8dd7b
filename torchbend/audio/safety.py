"""Safety: what stands between a bended model and the speakers (NaN guard, DC blocker, limiter)."""

# No ``from __future__ import annotations``: TorchScript reads the class annotations of the
# state buffers and cannot resolve them as strings (as in torchbend/models/cached_conv.py).

import math
from typing import Any

import torch
from torch import nn

from ..errors import AudioError, TorchbendError
from .safety_stats import SafetyStats, dc_blocker_matrices

__all__ = ["CEILING", "FILE_CEILING", "Safety", "safety_stage"]

CEILING = 10.0
"""Samples beyond ``±CEILING`` (+20 dB over full scale) are clipped there before the DC blocker
and the limiter, whose curve has reached full scale long before."""

FILE_CEILING = 10 ** (-0.3 / 20)
"""The ``ceiling`` of the safety stage for files written for listening (the command's renders,
the demo's, the examples'): -0.3 dBFS, so that no sample sits at full scale."""

_FREE_CEILING = 1e30
"""The clip with the limiter off: far out, only so that the DC blocker cannot overflow."""

_CHUNK = 64
"""The DC blocker runs as matrix products over chunks of this many samples..."""
_CHUNKS = 64
"""...and over segments of at most this many chunks, one after the other."""
_SEGMENT = _CHUNK * _CHUNKS


class Safety(nn.Module):
    """A safety stage for a model's audio output: nothing leaves it but finite samples within
    ``[-1, 1]``, and sound below the threshold goes through untouched.

    Three parts, in this order, each of which can be turned off:

    - **guard**: NaN and infinite samples become 0, and the channel then fades back in over
      ``fade`` seconds (linearly) instead of jumping back with a click.
    - **DC blocker**: a one-pole high-pass filter, ``y[n] = x[n] - x[n-1] + a * y[n-1]`` with
      ``a = exp(-2 pi cutoff / sample_rate)``: -3 dB at ``cutoff`` (10 Hz by default, below
      what speakers play), 0.04 dB down at 100 Hz.
    - **limiter**: a peak envelope with instant attack and exponential release (time constant
      ``release``) sets the gain so that the envelope's level ``e`` comes out at ``f(e)``:
      ``f(e) = e`` up to ``threshold`` (unity gain: untouched), then
      ``threshold + k * tanh((e - threshold) / k)`` with ``k = ceiling - threshold``, a
      smooth, monotonic knee towards ``ceiling`` (full scale by default). As the envelope is
      never below the sample, every sample comes out within ``f(e) <= ceiling``; and as the
      attack is instant, no look-ahead (no latency) and no clipper behind it are needed.
      The cost: a sudden peak is turned down within the sample it arrives in, a brief
      distortion on a hard transient, and a loud low note's gain ripples a little between
      its peaks (less with a longer ``release``).

    Before the DC blocker and the limiter, samples are clipped to ``±10`` (:data:`CEILING`),
    where the limiter's curve is at full scale already: one wild sample (``1e30``) would
    otherwise hold the gain down, and the DC blocker's output up, for seconds. (With the
    limiter off, they are clipped to ``±1e30`` only, so that the DC blocker cannot overflow.)
    With the guard off, NaN samples go through, and the DC blocker spreads them over up to
    4096 samples around them; its state is cleared of them after each block.

    Cost: on the model's output below the threshold, the stage is two reductions (to decide
    what to do) and the DC blocker, two small matrix products per block; the limiter's
    envelope (a running max, a log and an exp per sample) runs only on blocks that reach
    the threshold. ``benchmarks/bench_safety.py`` measures it against the shipped model.

    The stage is stateful, per channel (each row along time of its input): streaming a signal
    through it block by block gives what one call on the whole signal gives, to float rounding.
    The state starts over when the number of channels changes, and at :meth:`reset`. It runs
    in TorchScript (the nn~ export appends it to a model's methods).

    Args:
        sample_rate: sample rate of the audio, in Hz; ``cutoff``, ``release`` and ``fade``
            are converted to samples at it.
        guard: replace NaN and infinite samples with 0.
        dc: remove DC with the high-pass filter.
        limit: limit the output to ``[-1, 1]``.
        threshold: level up to which the limiter leaves the sound untouched, in ``(0, 1)``
            (0.8 is -1.9 dBFS).
        ceiling: level the limiter's curve tends to and never passes, above ``threshold``
            and at most 1 (full scale). A file written for listening takes
            :data:`FILE_CEILING` (-0.3 dBFS): a sample of a loud passage at exactly full
            scale reads as clipped, and a converter may overshoot it.
        release: time constant of the limiter's release, in seconds.
        cutoff: cutoff of the DC blocker, in Hz.
        fade: duration of the guard's fade back in after a NaN or infinite sample, in
            seconds (0: none).

    Shape:
        - Input: ``[..., time]``, each row along time a channel (``[batch, channels, time]``
          from a model).
        - Output: the same.

    Example:
        >>> safety = Safety(44100)
        >>> x = torch.randn(2, 4096) * 1e6  # a model that blew up
        >>> x[0, 100] = float("nan")
        >>> y = safety(x)
        >>> bool(y.isfinite().all()), bool(y.abs().max() <= 1)
        (True, True)
        >>> safety.stats.nonfinite, safety.stats.limited_blocks
        (1, 1)
        >>> quiet = torch.randn(2, 4096) * 0.1
        >>> torch.equal(Safety(44100, dc=False)(quiet), quiet)  # untouched below threshold
        True
    """

    __jit_unused_properties__ = ["stats"]  # TorchScript leaves it out: Python reads it

    decay: torch.Tensor
    dc_matrix: torch.Tensor
    dc_powers: torch.Tensor
    dc_carry: torch.Tensor
    dc_chunk_powers: torch.Tensor
    dc_state: torch.Tensor
    dc_peak: torch.Tensor
    log_env: torch.Tensor
    age: torch.Tensor

    def __init__(
        self,
        sample_rate: int = 44100,
        *,
        guard: bool = True,
        dc: bool = True,
        limit: bool = True,
        threshold: float = 0.8,
        ceiling: float = 1.0,
        release: float = 0.1,
        cutoff: float = 10.0,
        fade: float = 0.01,
    ) -> None:
        super().__init__()
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate < 1:
            raise AudioError(f"sample_rate must be a positive int of Hz, got {sample_rate!r}")
        for name, flag in (("guard", guard), ("dc", dc), ("limit", limit)):
            if not isinstance(flag, bool):
                raise AudioError(f"{name} must be True or False, got {flag!r}")
        high = sample_rate / 4
        _check_number("threshold", threshold, 0.0, 1.0, "between 0 and 1", high_in=False)
        _check_number("ceiling", ceiling, threshold, 1.0, f"above threshold {threshold}, up to 1")
        _check_number("release", release, 0.0, 10.0, "0 to 10 seconds (not 0)")
        _check_number("cutoff", cutoff, 0.0, high, f"0 to {high:g} Hz (not 0)")
        _check_number("fade", fade, 0.0, 10.0, "0 to 10 seconds", low_in=True)
        self.sample_rate = sample_rate
        self.guard = guard
        self.dc = dc
        self.limit = limit
        self.threshold = float(threshold)
        self.ceiling = float(ceiling)
        self.release = float(release)
        self.cutoff = float(cutoff)
        self.fade = float(fade)
        self.fade_samples = round(fade * sample_rate)
        self.clip = CEILING if limit else _FREE_CEILING
        self.chunk = _CHUNK  # TorchScript reads module attributes, not a module's globals
        self.segment = _SEGMENT
        # The limiter's envelope, in the log domain: a level decays by ``log_release`` a sample.
        self.log_release = -1.0 / (release * sample_rate)
        self.log_threshold = math.log(threshold)
        steps = torch.arange(_SEGMENT, dtype=torch.float64)
        self.register_buffer("decay", (steps * self.log_release).float(), persistent=False)
        # The DC blocker as two matrix products (see dc_blocker_matrices): it subtracts from
        # each sample the input low-passed at ``cutoff`` (the DC offset).
        self.a = math.exp(-2.0 * math.pi * cutoff / sample_rate)
        for name, tensor in dc_blocker_matrices(self.a, _CHUNK, _CHUNKS).items():
            self.register_buffer(name, tensor, persistent=False)
        self.register_buffer("dc_state", torch.zeros(0), persistent=False)
        self.register_buffer("log_env", torch.zeros(0), persistent=False)
        self.register_buffer("age", torch.zeros(0, dtype=torch.long), persistent=False)
        self.register_buffer("dc_peak", torch.zeros(0), persistent=False)
        self.quiet = True
        """Whether the limiter's envelope is below the threshold on every channel."""
        self.fading = False
        """Whether a channel is fading back in after a NaN or infinite sample."""
        self.peak = 0.0
        """The largest size of a sample that came in (:attr:`SafetyStats.peak`)."""
        self.reset(state=False)  # the counters of stats

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        length = x.shape[-1]
        self.blocks += 1
        if length == 0 or not (self.guard or self.dc or self.limit):
            return x
        rows = x.reshape(-1, length)
        if self.dc_state.shape[0] != rows.shape[0]:
            self._start(rows.shape[0], x.device)
        peak = float(rows.abs().amax())
        if self.guard and (self.fading or not math.isfinite(peak)):
            rows = self._guard(rows)
            peak = float(rows.abs().amax())
        if math.isnan(peak):  # the guard is off: NaN goes through, the rest is still limited
            peak = math.inf
        self.peak = max(self.peak, peak)
        if not self.dc and not self.limit:
            return rows.reshape(shape)
        if peak > self.clip:
            rows = rows.clamp(-self.clip, self.clip)
        parts: list[torch.Tensor] = []
        limited = False
        for start in range(0, length, self.segment):
            part = rows if length <= self.segment else rows[:, start : start + self.segment]
            if self.dc:
                part = self._highpass(part)
                peak = float(part.abs().amax())
                if math.isnan(peak):
                    peak = math.inf
            if self.limit and (peak > self.threshold or not self.quiet):
                part, acted = self._limiter(part)
                limited = limited or acted
            parts.append(part)
        if limited:
            self.limited_blocks += 1
        rows = parts[0] if len(parts) == 1 else torch.cat(parts, -1)
        return rows.reshape(shape)

    @torch.jit.export
    def reset(self, state: bool = True) -> None:
        """Clear the counters of :attr:`stats` and, with ``state``, the filters' state."""
        self.blocks = 0
        self.guarded_blocks = 0
        self.nonfinite = 0
        self.limited_blocks = 0
        self.limited_samples = 0
        self.limited_time = 0
        self.peak = 0.0
        self.min_gain = 1.0
        self.dc_peak.zero_()
        if state:
            self._start(0, self.dc_state.device)

    def _start(self, rows: int, device: torch.device) -> None:
        """Fresh state for ``rows`` channels: silence before, no fade under way."""
        self.dc_state = torch.zeros(rows, device=device)
        self.dc_peak = torch.zeros(rows, device=device)
        self.log_env = torch.full((rows,), -math.inf, device=device)
        self.age = torch.full((rows,), self.fade_samples, dtype=torch.long, device=device)
        self.quiet = True
        self.fading = False

    def _guard(self, x: torch.Tensor) -> torch.Tensor:
        """NaN and infinite samples to 0, and a linear fade back in after them."""
        bad = ~torch.isfinite(x)
        count = int(bad.sum())
        if count:
            self.guarded_blocks += 1
            self.nonfinite += count
            x = torch.where(bad, torch.zeros_like(x), x)
        if self.fade_samples == 0:
            return x
        # Where each sample's last bad sample lies (before the block: -age), by a running max.
        index = torch.arange(x.shape[-1], device=x.device)
        last = torch.where(bad, index, -self.age[:, None]).cummax(-1).values
        distance = index - last
        self.age = (x.shape[-1] - last[:, -1]).clamp(max=self.fade_samples)
        self.fading = bool((self.age < self.fade_samples).any())
        gain = (distance.to(x.dtype) / self.fade_samples).clamp(max=1.0)
        return torch.where(distance < self.fade_samples, x * gain, x)

    def _highpass(self, x: torch.Tensor) -> torch.Tensor:
        """The DC blocker on up to ``segment`` samples of each row."""
        rows, length = x.shape[0], x.shape[-1]
        chunks = (length + self.chunk - 1) // self.chunk
        matrix, carry = self.dc_matrix, self.dc_carry
        powers, chunk_powers = self.dc_powers, self.dc_chunk_powers
        if x.dtype != matrix.dtype:
            matrix, carry = matrix.to(x.dtype), carry.to(x.dtype)
            powers, chunk_powers = powers.to(x.dtype), chunk_powers.to(x.dtype)
        padded = x
        if length != chunks * self.chunk:
            padded = torch.nn.functional.pad(x, [0, chunks * self.chunk - length])
        zero_state = torch.mm(padded.reshape(rows * chunks, self.chunk), matrix)
        zero_state = zero_state.view(rows, chunks, self.chunk + 1)
        # (narrow and select rather than indexing: one call each, on the hot path; a product
        # then a sum rather than addmm, which TorchScript's optimizer splits so, rounding
        # otherwise than eager: the exported stage gives Python's samples bit for bit)
        entering = torch.outer(
            self.dc_state.to(x.dtype), chunk_powers.narrow(0, 0, chunks + 1)
        ) + torch.mm(
            zero_state.select(2, self.chunk),
            carry.narrow(0, 0, chunks).narrow(1, 0, chunks + 1),
        )
        y = torch.addcmul(
            zero_state.narrow(2, 0, self.chunk),
            entering.narrow(1, 0, chunks).unsqueeze(2),
            powers,
        ).view(rows, chunks * self.chunk)
        if length == chunks * self.chunk:
            state = entering.select(1, chunks)
        else:  # lp one past the block is not one past the padding
            y = y[:, :length]
            state = torch.sub(x[:, -1], y[:, -1], alpha=self.a)
        if not self.guard:  # NaN in the block: it must not stay in the state
            state = torch.nan_to_num(state, 0.0)
        self.dc_state.copy_(state)
        # ``lp`` is the offset removed: keep its largest size.
        torch.maximum(self.dc_peak, state.abs(), out=self.dc_peak)
        return y

    def _limiter(self, x: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """The limiter on up to ``segment`` samples of each row, and whether it acted.

        Only levels above the threshold set a gain, so the limiter skips blocks whose samples
        and envelope stay below it (``quiet``): what the envelope keeps of them would never
        count. Otherwise, ``log e[n]`` is the largest ``log |x[k]| + (n - k) * log_release``
        over ``k <= n`` and the state: a running max once ``n``'s share is taken out.
        """
        decay = self.decay[: x.shape[-1]].to(x.dtype)
        level = x.abs().log()
        if not self.guard:
            level = torch.nan_to_num(level, -math.inf)
        log_env = torch.maximum(
            (level - decay).cummax(-1).values + decay,
            self.log_env.to(x.dtype)[:, None] + (decay + self.log_release),
        )
        self.log_env = log_env[:, -1].to(self.log_env.dtype)
        self.quiet = not bool((self.log_env > self.log_threshold).any())
        over = log_env > self.log_threshold
        count = int(over.sum())
        if count == 0:
            return x, False
        env = log_env.exp()
        knee = self.ceiling - self.threshold
        curve = self.threshold + knee * torch.tanh((env - self.threshold) / knee)
        gain = torch.where(over, (curve / env).clamp(max=1.0), torch.ones_like(env))
        self.limited_samples += count
        self.limited_time += int(over.any(0).sum())
        self.min_gain = min(self.min_gain, float(gain.min()))
        # |x| <= e, so |x| * f(e) / e <= f(e) <= ceiling; the clamp only takes rounding off.
        limited = (x * gain).clamp(-self.ceiling, self.ceiling)
        return torch.where(over, limited, x), True

    @property
    def stats(self) -> SafetyStats:
        """What the stage did since it was made or :meth:`reset`, as a :class:`SafetyStats`."""
        return SafetyStats(
            blocks=self.blocks,
            guarded_blocks=self.guarded_blocks,
            nonfinite=self.nonfinite,
            limited_blocks=self.limited_blocks,
            limited_samples=self.limited_samples,
            max_reduction_db=-20.0 * math.log10(max(self.min_gain, 1e-300)),
            max_dc=float(self.dc_peak.max()) if self.dc_peak.numel() else 0.0,
            peak=self.peak,
            limited_seconds=self.limited_time / self.sample_rate,
        )

    def extra_repr(self) -> str:
        defaults = Safety.__init__.__kwdefaults__ or {}
        args = [str(self.sample_rate)]
        for name in ("guard", "dc", "limit", "threshold", "ceiling", "release", "cutoff", "fade"):
            value = getattr(self, name)
            if value != defaults[name]:
                args.append(f"{name}={value!r}")
        return ", ".join(args)


def _check_number(
    name: str,
    value: object,
    low: float,
    high: float,
    bound: str,
    low_in: bool = False,
    high_in: bool = True,
) -> None:
    """Raise an :class:`AudioError` unless ``value`` is a number from ``low`` to ``high``
    (each included or not), saying ``bound``."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number:
        above = value >= low if low_in else value > low  # type: ignore[operator]
        below = value <= high if high_in else value < high  # type: ignore[operator]
    if not number or not (above and below):
        raise AudioError(f"{name} must be {bound}, got {value!r}")


def safety_stage(
    safety: Any, sample_rate: int, what: str, error: type[TorchbendError] = AudioError
) -> Safety | None:
    """The stage a ``safety=`` argument asks for (``True``: a new one at ``sample_rate``;
    ``False``: none; a :class:`Safety`: itself, if it works at ``sample_rate``), or an
    ``error`` that names ``what`` runs at that rate (``"the stream"``)."""
    if isinstance(safety, Safety):
        if safety.sample_rate != sample_rate:
            raise error(
                f"the safety stage works at {safety.sample_rate} Hz and {what} at "
                f"{sample_rate} Hz; make it with Safety({sample_rate}, ...)"
            )
        return safety
    if not isinstance(safety, bool):
        raise error(f"safety must be True, False or a tb.audio.Safety, got {safety!r}")
    return Safety(sample_rate) if safety else None
