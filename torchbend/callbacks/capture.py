"""Capture: record activations while the model runs, and mix captured activations back in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .base import BendingCallback

__all__ = ["Capture", "InterpolateActivation", "InterpolationFromCapture", "crossfade"]


class Capture(BendingCallback):
    """Records the activations it sees while capturing; leaves them unchanged.

    Start and stop it with ``cb.capture()`` / ``cb.stop()``, or for every Capture of a model
    with ``with bended.capture(): ...``. ``cb.captures[name]`` holds what target ``name`` saw,
    concatenated along the batch (first) axis.

    Args:
        capturing: start capturing at once.

    Shape:
        - Input: any; captures of one target must agree on every axis but the first.
        - Output: same as input (unchanged).

    Example:
        >>> import torch
        >>> from torchbend.callbacks.capture import Capture
        >>> cb = Capture(capturing=True)
        >>> _ = cb(torch.ones(1, 2), "act"); _ = cb(torch.zeros(2, 2), "act")
        >>> cb.captures["act"].shape
        torch.Size([3, 2])
    """

    scriptable = False

    def __init__(self, capturing: bool = False) -> None:
        super().__init__()
        self.capturing = capturing
        self._seen: dict[str, list[torch.Tensor]] = {}

    def capture(self) -> Capture:
        """Start recording (usable as a context manager that stops on exit)."""
        self.capturing = True
        return self

    def stop(self) -> None:
        """Stop recording; what was captured stays."""
        self.capturing = False

    def __enter__(self) -> Capture:
        return self.capture()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def clear(self) -> None:
        self._seen.clear()

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if self.capturing:
            self._seen.setdefault(name, []).append(x.detach().clone())
        return x

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        if self.capturing:
            self._seen[name] = [weight.detach().clone()]
        return weight

    @property
    def captures(self) -> dict[str, torch.Tensor]:
        """What each target saw, concatenated along the batch axis."""
        out: dict[str, torch.Tensor] = {}
        for name, items in self._seen.items():
            try:
                out[name] = torch.cat(items) if len(items) > 1 else items[0]
            except RuntimeError as e:
                shapes = sorted({tuple(t.shape) for t in items})
                raise BendingError(
                    f"captures of '{name}' have shapes {shapes} that differ beyond the batch "
                    "axis and cannot be concatenated; clear() between runs of other lengths"
                ) from e
        return out

    def save(self, path: str | Path) -> None:
        """Save the captures with TensorDict's memory-mapped storage (for large runs)."""
        try:
            from tensordict import TensorDict
        except ImportError as e:
            raise ImportError(
                "saving captures needs tensordict: pip install torchbend[tensordict]"
            ) from e
        data = {_key(name): t for name, t in self.captures.items()}
        names = {_key(name): name for name in self.captures}
        td = TensorDict(data, batch_size=[])
        td.memmap(str(path))
        Path(path, "names.txt").write_text("\n".join(f"{k}\t{v}" for k, v in names.items()))

    @staticmethod
    def load(path: str | Path) -> dict[str, torch.Tensor]:
        """Load captures saved by :meth:`save` (memory-mapped), by target name."""
        from tensordict import TensorDict

        td = TensorDict.load_memmap(str(path))
        names = dict(line.split("\t") for line in Path(path, "names.txt").read_text().splitlines())
        return {names[str(k)]: td[k] for k in td.keys()}

    @classmethod
    def neutral_setting(cls) -> dict[str, Any] | None:
        return {}  # it leaves what it sees unchanged


def _key(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def _fit(source: torch.Tensor, x: torch.Tensor, name: str, owner: str) -> torch.Tensor:
    """``source`` brought to ``x``'s shape: batch averaged or broadcast, time cropped/padded."""
    if source.dim() != x.dim() or source.shape[1:-1] != x.shape[1:-1]:
        raise BendingError(
            f"{owner}: the activation mixed into '{name}' has shape {list(source.shape)}, which "
            f"does not fit {list(x.shape)} (it must agree on every axis but batch and time)"
        )
    if source.shape[0] != x.shape[0]:
        source = source.mean(0, keepdim=True)
    length = x.shape[-1]
    if source.shape[-1] > length:
        source = source[..., :length]
    elif source.shape[-1] < length:
        source = F.pad(
            source,
            (0, length - source.shape[-1]),
            mode="replicate" if source.dim() in (3, 4, 5) else "constant",
        )
    return source.to(dtype=x.dtype, device=x.device)


def at_zero(amount: float | torch.Tensor) -> bool:
    """Whether ``amount`` is the number 0 (a tensor, a ramp along time, is not). Its own
    function: TorchScript writes code for ``not isinstance(a, Tensor) and a == 0.0`` inline
    that ``torch.jit.load`` refuses when ``a`` is used after it."""
    if isinstance(amount, torch.Tensor):
        return False
    return amount == 0.0


def crossfade(x: torch.Tensor, source: torch.Tensor, amount: float | torch.Tensor) -> torch.Tensor:
    """``(1 - amount) * x + amount * source``, with ``source`` broadcasting onto ``x``.

    Computed as ``x + (source - x) * amount``; at ``amount`` 0 it returns ``x`` itself and at 1
    a copy of ``source`` (expanded to ``x``'s shape), bit for bit, so that the ends of a
    crossfade are exact (``-0.0`` stays, an infinite ``x`` does not make a NaN). ``amount``
    may be a tensor that broadcasts onto ``x`` (a ramp along time).
    """
    # One return per type of ``amount``: TorchScript needs the branch to know the product.
    if isinstance(amount, torch.Tensor):
        return x + (source - x) * amount
    if amount == 0.0:
        return x
    if amount == 1.0:
        return source.expand_as(x).clone()
    return x + (source - x) * amount


class InterpolateActivation(BendingCallback):
    """Mixes given activations into the targets: ``(1 - weight) * x + weight * source``.

    Args:
        sources: a tensor, or a dict of tensors by target name (as ``get_activations``
            returns, keyed by node name or ``"<method>:<node>"``).
        weight: mixing weight in [0, 1]; ``0`` is the identity. May be a control; while it
            ramps, the change is spread along time.

    Shape:
        - Input: ``[batch, ..., time]``; sources with another batch size are averaged over
          their batch, and cropped or padded (with their last value) to the input's length.
        - Output: same as input.
    """

    scriptable = False

    weight = Argument(float, low=0.0, high=1.0, neutral=0.0, meaning="a mixing weight", ramps=True)

    def __init__(
        self, sources: torch.Tensor | dict[str, torch.Tensor], weight: float | Control = 0.5
    ) -> None:
        super().__init__()
        self.sources = sources
        self.weight = weight

    def _source(self, name: str) -> torch.Tensor:
        if isinstance(self.sources, torch.Tensor):
            return self.sources
        node = name.split(":", 1)[-1]
        for key in (name, node):
            if key in self.sources:
                return self.sources[key]
        raise BendingError(
            f"{type(self).__name__} has no source for '{name}'; sources: {sorted(self.sources)}"
        )

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        w = self.along("weight", x)
        if isinstance(w, float) and w == 0.0:
            return x
        source = _fit(self._source(name), x, name, type(self).__name__)
        return crossfade(x, source, w)


class InterpolationFromCapture(InterpolateActivation):
    """Mixes what a :class:`Capture` recorded for the same target into it.

    Args:
        capture: the Capture whose recordings are mixed in (read at each call).
        weight: mixing weight in [0, 1]; ``0`` is the identity. May be a control.
        index: which captured batch item to use; ``None`` averages them.
    """

    def __init__(
        self, capture: Capture, weight: float | Control = 0.5, index: int | None = None
    ) -> None:
        if not isinstance(capture, Capture):
            raise BendingError(f"{type(self).__name__} takes a Capture, got {capture!r}")
        super().__init__({}, weight)
        self.capture = capture
        self.index = index

    def _source(self, name: str) -> torch.Tensor:
        captures = self.capture.captures
        if name not in captures:
            raise BendingError(
                f"the Capture has recorded nothing for '{name}' (it has {sorted(captures)}); "
                "run the model inside `with bended.capture():` first"
            )
        source = captures[name]
        return source if self.index is None else source[self.index : self.index + 1]
