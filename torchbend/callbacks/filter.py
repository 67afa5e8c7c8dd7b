"""Filter: a resonant biquad filter (low-pass, high-pass, band-pass, band-stop) along time."""

import math

import torch

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .axes import as_dim, call_axis, normalized_dim
from .base import BendingCallback
from .capture import crossfade

__all__ = ["KINDS", "MIN_CUTOFF", "Filter", "biquad", "biquad_coefficients"]

KINDS = ("lowpass", "highpass", "bandpass", "bandstop")
"""The responses of :class:`Filter`, by name."""

MIN_CUTOFF = 1e-4
"""The lowest cutoff of :class:`Filter`, in cycles per sample (under 5 Hz at 48 kHz): lower,
the poles come so close to 1 that float32 outputs lose most of their digits."""


def biquad_coefficients(kind: str, cutoff: float, resonance: float) -> list[float]:
    """``[b0, b1, b2, a1, a2]``, normalized so that ``a0 = 1``, of a biquad of ``kind``.

    Robert Bristow-Johnson's *Audio EQ Cookbook* formulas: with ``w0 = 2 pi cutoff`` and
    ``alpha = sin(w0) / (2 resonance)``, the denominator is ``1 + alpha, -2 cos(w0), 1 - alpha``
    for every kind; the numerator is ``(1 - cos) / 2, 1 - cos, (1 - cos) / 2`` (low-pass),
    ``(1 + cos) / 2, -(1 + cos), (1 + cos) / 2`` (high-pass), ``alpha, 0, -alpha`` (band-pass
    with a peak gain of 1) or ``1, -2 cos, 1`` (band-stop).

    Args:
        kind: one of :data:`KINDS`.
        cutoff: the cutoff (or centre) frequency, in cycles per sample, in ``(0, 0.5)``.
        resonance: the quality factor ``Q``, ``> 0``.
    """
    w0 = 2.0 * math.pi * cutoff
    cos = math.cos(w0)
    alpha = math.sin(w0) / (2.0 * resonance)
    if kind == "lowpass":
        b = [(1.0 - cos) / 2.0, 1.0 - cos, (1.0 - cos) / 2.0]
    elif kind == "highpass":
        b = [(1.0 + cos) / 2.0, -(1.0 + cos), (1.0 + cos) / 2.0]
    elif kind == "bandpass":
        b = [alpha, 0.0, -alpha]
    else:
        b = [1.0, -2.0 * cos, 1.0]
    a0 = 1.0 + alpha
    return [b[0] / a0, b[1] / a0, b[2] / a0, -2.0 * cos / a0, (1.0 - alpha) / a0]


def _wide(values: list[float], device: torch.device) -> torch.Tensor:
    """``values`` as a float64 tensor. TorchScript builds ``torch.tensor(values)`` (and
    assigns ``t[i] = value``) through float32, which would round the coefficients."""
    return torch.stack([torch.full([], v, dtype=torch.float64, device=device) for v in values])


def _powers(a: torch.Tensor, count: int) -> torch.Tensor:
    """``[a**0, a**1, ..., a**(count - 1)]`` of a square matrix ``a``, by doubling."""
    powers = torch.eye(a.shape[0], dtype=a.dtype, device=a.device).unsqueeze(0)
    step = a
    while powers.shape[0] < count:
        # step is a**len(powers): the next len(powers) powers are the ones known times it.
        powers = torch.cat([powers, powers @ step])
        step = step @ step
    return powers[:count]


def biquad(
    x: torch.Tensor, coefficients: list[float], state: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``x`` through the biquad ``coefficients`` along its last axis, exactly and causally.

    ``y[n] = b0 x[n] + b1 x[n-1] + b2 x[n-2] - a1 y[n-1] - a2 y[n-2]``, the recursion of
    :func:`scipy.signal.lfilter`, computed without a loop over samples. In the transposed
    direct form II, the filter is a state ``z`` of two values: ``y[n] = b0 x[n] + z1[n-1]``,
    ``z[n] = A z[n-1] + B x[n]``. The samples are cut into chunks of 64: within a chunk, the
    output from rest is a product by the filter's impulse response (a triangular Toeplitz
    matrix); the state each chunk ends on is carried to the next by a parallel scan over the
    chunks (``log2(chunks)`` steps), and enters each sample ``i`` of the next as
    ``C A**i z``. Nothing is truncated: the result is the recursion's, up to rounding (the
    impulse response, the states and their scan are computed in float64), and a signal
    filtered block by block, each block from the state the last one returned, gives the
    signal filtered at once.

    Args:
        x: ``[..., time]``, floating point.
        coefficients: ``[b0, b1, b2, a1, a2]`` (``a0 = 1``), as :func:`biquad_coefficients`.
        state: ``[..., 2]``, the state ``z`` after the previous block, to go on from it (what
            this function returned for it); ``None`` starts from rest (zeros).

    Returns:
        ``y`` (shape and dtype of ``x``) and the state after ``x`` (float64), to pass with
        the next block.
    """
    b0, b1, b2, a1, a2 = (
        coefficients[0],
        coefficients[1],
        coefficients[2],
        coefficients[3],
        coefficients[4],
    )
    lead = x.shape[:-1]
    length = x.shape[-1]
    flat = x.reshape(-1, length)
    rows = flat.shape[0]
    wide = torch.float64
    device = x.device
    if state is None:
        start = torch.zeros(rows, 2, dtype=wide, device=device)
    else:
        start = state.reshape(rows, 2).to(wide)
    a = _wide([-a1, 1.0, -a2, 0.0], device).reshape(2, 2)
    b = _wide([b1 - a1 * b0, b2 - a2 * b0], device)
    # Chunks of 64 samples: longer ones do more arithmetic per sample (a product by a
    # size x size matrix), shorter ones more steps of the scan across chunks.
    size = max(1, min(length, 64))
    chunks = -(-length // size)
    powers = _powers(a, size + 1)  # A**0 ... A**size
    # The impulse response: g[0] = b0, g[m] = C A**(m - 1) B, with C = (1, 0).
    response = torch.cat([_wide([b0], device), powers[:-1, 0] @ b])
    lag = torch.arange(size, device=device)
    lag = lag.unsqueeze(1) - lag.unsqueeze(0)
    toeplitz = torch.where(lag >= 0, response[lag.clamp(min=0)], torch.zeros_like(response[:1]))
    work = flat.dtype
    if length % size != 0:
        flat = torch.nn.functional.pad(flat, (0, chunks * size - length))
    chunked = flat.reshape(rows * chunks, size)
    # The state each chunk ends on from rest, sum_j A**(size - 1 - j) B x[j] (in float64: the
    # terms may be large and cancel), then carried: z[k + 1] = A**size z[k] + ends[k], the
    # first chunk starting from `start`.
    into_end = powers[:size].flip(0) @ b  # [size, 2]
    ends = (chunked.to(wide) @ into_end).reshape(rows, chunks, 2)
    step = powers[size]
    carried = torch.cat([ends[:, :1] + (start @ step.t()).unsqueeze(1), ends[:, 1:]], 1)
    distance = 1
    while distance < chunks:
        # Hillis-Steele scan: each chunk adds what the chunk `distance` before it carries.
        carried = torch.cat(
            [carried[:, :distance], carried[:, distance:] + carried[:, :-distance] @ step.t()], 1
        )
        step = step @ step
        distance *= 2
    starts = torch.cat([start.unsqueeze(1), carried[:, :-1]], 1)  # [rows, chunks, 2]
    # Sample i of a chunk: its output from rest, and C A**i times the state it starts from.
    entry = powers[:size, 0]  # [size, 2]
    y = torch.addmm(
        chunked @ toeplitz.t().to(work), starts.reshape(-1, 2).to(work), entry.t().to(work)
    )
    y = y.reshape(rows, chunks * size)[:, :length]
    # The state after the last sample, which may fall inside the last (padded) chunk.
    last = length - (chunks - 1) * size
    tail = flat[:, length - last : length].to(wide) @ (powers[:last].flip(0) @ b)
    after = starts[:, -1] @ powers[last].t() + tail
    # Concatenated rather than unpacked: TorchScript has no starred expressions.
    return y.reshape(x.shape), after.reshape(list(lead) + [2])  # noqa: RUF005


class Filter(BendingCallback):
    """Filter the target along its last (time) axis with a resonant biquad.

    A second-order filter (Robert Bristow-Johnson's *Audio EQ Cookbook*): ``"lowpass"`` keeps
    what is slower than ``cutoff`` and smooths the target along time, ``"highpass"`` keeps
    what is faster (a constant is removed), ``"bandpass"`` keeps a band around ``cutoff``
    (with a gain of 1 at its centre), ``"bandstop"`` removes it. The recursion is computed
    exactly, in chunks, with no loop over samples (see :func:`biquad`), and causally: the
    output at a time depends on the target up to that time only.

    Each call filters from rest (zeros before the call), so that a call gives the same output
    whatever came before; with ``carry=True`` each activation instead goes on from where its
    previous call ended, so that a stream filtered block by block equals the whole filtered
    at once (:meth:`reset` goes back to rest). Weights are always filtered from rest.

    Args:
        kind: ``"lowpass"``, ``"highpass"``, ``"bandpass"`` or ``"bandstop"``.
        cutoff: the cutoff frequency (the centre, for a band), in cycles per sample: a
            fraction of the sample rate *of the node*, from :data:`MIN_CUTOFF` to ``0.5`` (its
            Nyquist frequency). On an activation whose frames come at ``R`` Hz, the cutoff
            is ``cutoff * R`` Hz: the same ``cutoff`` is a lower frequency deeper in a model
            that downsamples. At ``0.5`` a low-pass or a band-stop passes everything (the
            target itself is returned), a high-pass or a band-pass nothing (zeros). May be a
            control.
        resonance: the quality factor ``Q``, from 0.1 to 50. A low-pass or a high-pass has a
            gain of ``Q`` at the cutoff: ``0.7071`` (the default, a Butterworth filter) is
            flat in its pass band, higher values ring with a peak there. For a band, ``Q`` is
            about the centre frequency over the bandwidth: higher is narrower. May be a control.
        dim: the axis filtered (negative axes count from the end); ``-1``, time.
        mix: the share of the filtered target in the output, from 0 to 1: ``(1 - mix) * x +
            mix * filtered``. ``0`` is the identity (with ``carry``, the filter still runs, so
            that raising the mix brings in a settled filter). May be a control; while it
            ramps, activations get the change spread along time.
        carry: keep each activation's filter state from one call to the next (for
            streaming). The state is sized at registration for the activation's traced shape
            but ``dim``; a call of other sizes is filtered from rest and leaves it as it was.

    Shape:
        - Input: ``[..., time]``, at least 2 axes when registered (a ``[batch, channels, time]``
          activation, a ``[out, in]`` weight filtered along ``in``): a 1-d target, a bias,
          holds no time and is refused.
        - Output: same as input (floating point).

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Filter
        >>> impulse = torch.tensor([[1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
        >>> Filter("lowpass", cutoff=0.1)(impulse, "x")
        tensor([[0.0675, 0.2120, 0.2819, 0.2347, 0.1519, 0.0767]])
        >>> Filter("highpass", cutoff=0.1)(torch.ones(1, 4), "x")
        tensor([[ 0.6389,  0.0914, -0.1593, -0.2198]])
    """

    # TorchScript compiles the branch of ``carry`` even without it, and then needs the type of
    # the targets' states (``BendingCallback.state``) when there are none. It reads that type
    # only from a class annotation that is a real type, not a string: this is why this module,
    # unlike most, does not import ``annotations`` from ``__future__``.
    _state_names: dict[str, str]

    cutoff = Argument(float, low=MIN_CUTOFF, high=0.5, meaning="a frequency in cycles per sample")
    resonance = Argument(float, low=0.1, high=50.0, meaning="a quality factor (Q)")
    mix = Argument(
        float,
        low=0.0,
        high=1.0,
        neutral=0.0,
        meaning="the share of the filtered target",
        ramps=True,
    )

    def __init__(
        self,
        kind: str = "lowpass",
        cutoff: float | Control = 0.1,
        resonance: float | Control = 0.7071067811865476,
        dim: int = -1,
        mix: float | Control = 1.0,
        carry: bool = False,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        if kind not in KINDS:
            raise BendingError(
                f"{owner}: kind must be one of {', '.join(map(repr, KINDS))}, got {kind!r}"
            )
        if not isinstance(carry, bool):
            raise BendingError(f"{owner}: carry must be True or False, got {carry!r}")
        self.kind = kind
        self.cutoff = cutoff
        self.resonance = resonance
        self.dim = as_dim(owner, dim)
        self.mix = mix
        self.carry = carry

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        if len(shape) < 2:
            raise BendingError(
                f"{self!r} cannot bend '{name}' of shape {list(shape)}: it filters along time, "
                "and a target of fewer than 2 axes (a bias, a scalar) has none. Bend an "
                "activation [batch, channels, time], or a weight of 2 axes or more (filtered "
                "along its last axis)"
            )
        axis = normalized_dim(repr(self), self.dim, shape, name)
        if self.carry:
            kept = [size for i, size in enumerate(shape) if i != axis]
            self.add_state(name, torch.zeros([*kept, 2], dtype=torch.float64, device=device))

    def reset(self) -> None:
        """Bring the filter of every activation back to rest (with ``carry``)."""
        for name in self._state_names:
            self.state(name).zero_()

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        mix = self.along("mix", x)
        if isinstance(mix, torch.Tensor):
            return crossfade(x, self._filter(x, name, self.carry), mix)
        if mix == 0.0 and not self.carry:
            return x
        filtered = self._filter(x, name, self.carry)
        return crossfade(x, filtered, mix)

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        if self.mix == 0.0:
            return weight
        return crossfade(weight, self._filter(weight, name, False), self.mix)

    def _filter(self, x: torch.Tensor, name: str, carry: bool) -> torch.Tensor:
        """``x`` filtered along ``dim`` (from the target's state if ``carry``)."""
        dim = call_axis(x, self.dim, self.label(), name)
        if not x.is_floating_point():
            x = x.float()
        if x.shape[dim] == 0:
            return x
        if self.cutoff == 0.5:
            # w0 = pi: the poles sit on the unit circle and cancel the zeros (low-pass,
            # band-stop: H = 1) or the numerator vanishes (high-pass, band-pass: H = 0).
            if self.kind == "lowpass" or self.kind == "bandstop":
                return x
            return torch.zeros_like(x)
        coefficients = biquad_coefficients(self.kind, self.cutoff, self.resonance)
        moved = x.movedim(dim, -1)
        if carry:
            state = self.state(name)
            if state.shape[:-1] == moved.shape[:-1]:
                y, after = biquad(moved, coefficients, state)
                with torch.no_grad():
                    state.copy_(after)
                return y.movedim(-1, dim)
        y, _ = biquad(moved, coefficients, None)
        return y.movedim(-1, dim)
