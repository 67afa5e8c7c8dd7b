"""FeedbackDelay: an echo on an activation, carried from one call (one audio block) to the next.

A drop-in callback file: load it with ``tb.load_callbacks("callbacks/feedback.py")``.
"""

from __future__ import annotations

from typing import ClassVar

import torch

import torchbend as tb
from torchbend.controls import Control


def delay_line(
    x: torch.Tensor, history: torch.Tensor, delay: int, feedback: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``x`` through a delay line with feedback.

    The line holds ``w[t] = x[t] + feedback * w[t - delay]``; ``history`` holds its last
    ``delay`` values before ``x`` (``[..., delay]``). Returns ``w[t - delay]`` over ``x``'s
    times (the echo) and the line's last ``delay`` values (the next call's history).
    """
    length = x.shape[-1]
    line = torch.cat([history, torch.zeros_like(x)], -1)
    if feedback == 0.0:
        line[..., delay:] = x
    else:
        # Block by block: each block of `delay` samples feeds on the block before it.
        for start in range(0, length, delay):
            end = min(start + delay, length)
            line[..., delay + start : delay + end] = (
                x[..., start:end] + feedback * line[..., start:end]
            )
    return line[..., :length], line[..., length:]


class FeedbackDelay(tb.BendingCallback):
    """Add echoes of an activation to itself, across calls: a delay with feedback.

    The callback keeps, for each activation it bends, a delay line along the last (time)
    axis that carries over from one call to the next, as an audio effect does from one block
    to the next. Each call adds ``mix`` times the line delayed by ``delay`` samples; the line
    feeds back on itself with gain ``feedback``, so that the echoes come at ``delay``,
    ``2 * delay``... samples with gains ``mix``, ``mix * feedback``... :meth:`reset` empties
    the lines.

    The lines are sized at registration for the activation's batch and channels (its traced
    shape but time); a call with other leading sizes starts a new, empty line. On a weight,
    the delay runs once along its last axis from an empty line, and touches no state.

    Args:
        delay: delay in samples, an int ``>= 1``. May be an int control: a change keeps the
            most recent part of the line.
        feedback: gain of the line on itself, from 0 (a single echo) to 0.999.
            May be a control.
        mix: gain of the echo added to the activation, ``>= 0``. ``0`` is the identity (the
            line still runs, so that raising the mix brings in echoes at once). May be a
            control; while it ramps, the change is spread along time.

    Shape:
        - Input: ``[..., time]``, any length.
        - Output: same as input.

    Notes:
        Not scriptable: the lines change shape and are replaced while running.

    Example:
        >>> import torch
        >>> echo = FeedbackDelay(delay=2, feedback=0.5, mix=1.0)
        >>> echo.register("act", torch.Size([1, 3]), torch.float32, torch.device("cpu"))
        >>> echo(torch.tensor([[1.0, 0.0, 0.0]]), "act")
        tensor([[1., 0., 1.]])
        >>> echo(torch.tensor([[0.0, 0.0, 0.0]]), "act")
        tensor([[0.0000, 0.5000, 0.0000]])
    """

    scriptable: ClassVar[bool] = False

    delay = tb.Argument(int, low=1, meaning="a delay in samples", derives=True)
    feedback = tb.Argument(float, low=0.0, high=0.999, meaning="the gain of the line on itself")
    mix = tb.Argument(float, low=0.0, neutral=0.0, meaning="the gain of the echo", ramps=True)

    def __init__(
        self,
        delay: int | Control = 4410,
        feedback: float | Control = 0.0,
        mix: float | Control = 0.0,
    ) -> None:
        super().__init__()
        self.delay = delay
        self.feedback = feedback
        self.mix = mix

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        if len(shape) == 0:
            raise tb.BendingError(f"{self!r} cannot bend '{name}': it is a scalar, with no time")
        line_dtype = dtype if dtype.is_floating_point else torch.float32
        self.add_state(
            name, torch.zeros([*shape[:-1], self.delay], dtype=line_dtype, device=device)
        )

    def control_changed(self) -> None:
        # A new delay (declared derives=True) resizes the lines, keeping their most recent
        # part; the other arguments are read at each call.
        for name in self._targets:
            line = self.state(name)
            if line.shape[-1] != self.delay:
                resized = line.new_zeros([*line.shape[:-1], self.delay])
                kept = min(self.delay, line.shape[-1])
                resized[..., -kept:] = line[..., -kept:]
                self.add_state(name, resized)

    def reset(self) -> None:
        """Empty the delay lines: the next call starts from silence."""
        for name in self._targets:
            self.state(name).zero_()

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        history = self.state(name)
        if history.shape[:-1] != x.shape[:-1] or history.shape[-1] != self.delay:
            history = x.new_zeros([*x.shape[:-1], self.delay])
        history = history.to(dtype=x.dtype, device=x.device)
        echo, rest = delay_line(x, history, self.delay, self.feedback)
        self.add_state(name, rest.detach())
        mix = self.along("mix", x)
        if not isinstance(mix, torch.Tensor) and mix == 0.0:
            return x
        return x + mix * echo

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        mix = self.mix
        if mix == 0.0:
            return weight
        history = weight.new_zeros([*weight.shape[:-1], self.delay])
        echo, _ = delay_line(weight, history, self.delay, self.feedback)
        return weight + mix * echo
