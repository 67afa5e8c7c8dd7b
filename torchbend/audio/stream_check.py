"""Streaming check: does a model give the same output block by block as in one pass?"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["StreamCheck", "StreamWarning", "probe_module", "probe_streaming"]

PROBE_BLOCKS = 3
"""Blocks the probe streams (plus as many as the model's latency spans): two block edges."""

RELATIVE_TOLERANCE = 1e-4
"""Largest difference taken for float rounding, relative to the output's peak."""

CLICK_RATIO = 4.0
"""For a model that draws random numbers: how much larger the difference must be near block
edges than elsewhere to be taken for clicks rather than for different draws."""


class StreamWarning(UserWarning):
    """A model that does not give the same output block by block as in one pass."""


@dataclass(frozen=True)
class StreamCheck:
    """What :func:`probe_streaming` measured: a model's output block by block against its
    output in one pass, on the same seeded noise, each from a fresh state."""

    block_size: int
    """Input frames (samples, for audio) per block."""
    shift: int
    """Output frames the streamed output was shifted by to match: ``0`` or the model's
    declared ``latency``, whichever matched better."""
    max_error: float
    """Largest absolute difference between the two outputs."""
    edge_error: float
    """Mean absolute difference within :attr:`edge` frames of a block edge (the first and the
    last frames of each block)."""
    inner_error: float
    """Mean absolute difference over the other frames."""
    edge: int
    """Frames counted as a block's edge."""
    peak: float
    """Largest absolute value of the output in one pass."""
    random: bool
    """The output changed with the random seed (noise synthesis): the two passes can differ
    without clicks, so only a difference concentrated at block edges counts."""
    verdict: str
    """``"exact"`` (the same, to float rounding), ``"differs"`` (it clicks at block edges, or
    differs everywhere), ``"random"`` (different draws, no clicks seen) or ``"unchecked"``
    (:attr:`reason` says why)."""
    reason: str = ""
    """Why the check could not run (``verdict == "unchecked"``)."""

    @property
    def ok(self) -> bool:
        """Whether streaming can be trusted (anything but ``"differs"``)."""
        return self.verdict != "differs"

    def describe(self, what: str) -> str:
        """A sentence for users: what ``what`` (a model's method) does block by block."""
        if self.verdict == "unchecked":
            return f"{what}: streaming not checked ({self.reason})"
        size = (
            f"block by block at {self.block_size} its output differs from one pass by up to "
            f"{self.max_error:.3g} (mean {self.edge_error:.3g} within {self.edge} samples of "
            f"block edges, {self.inner_error:.3g} elsewhere; peak {self.peak:.3g})"
        )
        if self.verdict == "exact":
            return f"{what} streams exactly: {size}"
        if self.verdict == "random":
            return f"{what} draws random numbers; no clicks at block edges: {size}"
        return (
            f"{what} does not stream: {size}. It keeps no state from one block to the next, "
            "so it plays with a click at every block edge. Convert it with "
            "tb.audio.make_streaming(model) (its convolutions keep their past input and its "
            "recurrent layers their state, at a latency it reports), or call "
            "model.set_streaming(True) if it has it"
        )


Run = Callable[[torch.Tensor], torch.Tensor]


def probe_streaming(
    fresh: Callable[[], Run],
    block_size: int,
    channels: int,
    latency: int = 0,
    seed: int = 0,
) -> StreamCheck:
    """Run a model on seeded noise in one pass and block by block, and compare.

    Each pass starts from ``fresh()``, which returns the function to call on a model whose
    state was reset (its ``reset_cache()``, or a fresh load of a file), and runs with the
    global random seed set to ``seed``, so that a model drawing noise draws the same numbers
    in both when it draws them in order. A model with a ``latency`` may give its streamed
    output delayed by it: both shifts are tried, and the closer one kept.

    Args:
        fresh: returns the function to run, on a fresh state.
        block_size: input frames per block (samples, for audio).
        channels: input channels.
        latency: the model's declared latency, in input frames.
        seed: the noise's and the passes' seed.
    """
    blocks = PROBE_BLOCKS + math.ceil(latency / block_size)
    generator = torch.Generator().manual_seed(seed)
    x = 0.5 * torch.randn(1, channels, blocks * block_size, generator=generator)
    try:
        # Blocks first: a bending whose state takes the shape it first sees (a Mask) gets the
        # blocks' shape, which the stream gives it next, and not the pass's.
        parts = _by_blocks(fresh, x, block_size, seed)
        whole = _one_pass(fresh, x, seed)
    except Exception as e:  # the model may raise anything on a length it does not take
        return _unchecked(block_size, f"{type(e).__name__}: {str(e).strip()[:200]}")
    if not isinstance(whole, torch.Tensor) or whole.shape[:-1] != parts[0].shape[:-1]:
        return _unchecked(block_size, "its output is not one [batch, channels, time] tensor")
    streamed = torch.cat(parts, -1)
    if streamed.shape != whole.shape or len({p.shape[-1] for p in parts}) != 1:
        return _unchecked(
            block_size,
            f"one pass gives {list(whole.shape)}, blocks give {[list(p.shape) for p in parts]}",
        )
    if not (whole.isfinite().all() and streamed.isfinite().all()):
        return _unchecked(block_size, "its output on noise is not finite")
    out_block = parts[0].shape[-1]
    shifts = (
        {0, latency * out_block // block_size} if latency * out_block % block_size == 0 else {0}
    )
    errors = {s: _difference(whole, streamed, s) for s in sorted(shifts)}
    shift = min(errors, key=lambda s: float(errors[s].max()) if errors[s].numel() else 0.0)
    error = errors[shift]
    edge = max(1, min(out_block // 16, 8))
    position = (torch.arange(error.shape[-1]) + shift) % out_block
    near = (position < edge) | (position >= out_block - edge)
    edge_error = float(error[..., near].mean()) if near.any() else 0.0
    inner_error = float(error[..., ~near].mean()) if (~near).any() else 0.0
    peak = float(whole.abs().max()) if whole.numel() else 0.0
    largest = float(error.max()) if error.numel() else 0.0
    tolerance = RELATIVE_TOLERANCE * max(peak, 1e-2)
    random = False
    if largest <= tolerance:
        verdict = "exact"
    else:
        other = _one_pass(fresh, x, seed + 1)
        random = float((other - whole).abs().max()) > tolerance
        clicks = edge_error > CLICK_RATIO * max(inner_error, 1e-12)
        verdict = "random" if random and not clicks else "differs"
    return StreamCheck(
        block_size, shift, largest, edge_error, inner_error, edge, peak, random, verdict
    )


def probe_module(
    module: torch.nn.Module, run: Run, block_size: int, channels: int, latency: int = 0
) -> StreamCheck:
    """:func:`probe_streaming` on ``run``, a method of ``module``: each pass from the state
    ``module`` had (its buffers, put back after), reset by its ``reset_cache()`` if it has
    one (a model without state of its own starts every block from silence)."""
    saved = [(name, buffer.clone()) for name, buffer in module.named_buffers()]

    def fresh() -> Run:
        _restore(module, saved)
        reset = getattr(module, "reset_cache", None)
        if callable(reset):
            reset()
        return run

    try:
        return probe_streaming(fresh, block_size, channels, latency)
    finally:
        _restore(module, saved)


def _restore(module: torch.nn.Module, saved: list[tuple[str, torch.Tensor]]) -> None:
    """Put back the buffers ``saved`` from ``module`` (its state between blocks): in place
    (a traced graph may hold the tensor itself), or replaced where the batch resized it."""
    buffers = dict(module.named_buffers())
    with torch.no_grad():
        for name, value in saved:
            if buffers[name].shape == value.shape:
                buffers[name].copy_(value)
            else:
                owner, _, leaf = name.rpartition(".")
                setattr(module.get_submodule(owner) if owner else module, leaf, value.clone())


def _one_pass(fresh: Callable[[], Run], x: torch.Tensor, seed: int) -> torch.Tensor:
    run = fresh()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        return run(x)


def _by_blocks(
    fresh: Callable[[], Run], x: torch.Tensor, block_size: int, seed: int
) -> list[torch.Tensor]:
    run = fresh()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        return [run(block) for block in x.split(block_size, -1)]


def _difference(whole: torch.Tensor, streamed: torch.Tensor, shift: int) -> torch.Tensor:
    """``|streamed - whole|`` with ``streamed`` advanced by ``shift`` frames, per frame (the
    largest over batch and channels)."""
    length = whole.shape[-1] - shift
    diff = (streamed[..., shift:] - whole[..., :length]).abs().double()
    return diff.reshape(-1, length).amax(0)


def _unchecked(block_size: int, reason: str) -> StreamCheck:
    nan = math.nan
    return StreamCheck(block_size, 0, nan, nan, nan, 0, nan, False, "unchecked", reason)
