"""One switch for the stateful parts of a shipped model: streaming or offline, and a reset."""

from typing import TypeVar

from torch import nn

__all__ = ["Streamable"]

S = TypeVar("S", bound="Streamable")


class Streamable(nn.Module):
    """A model whose stateful parts (submodules with a ``streaming`` flag and a
    ``reset_cache`` method: cached convolutions, the analysis, the synthesizer) switch and
    reset together."""

    def set_streaming(self: S, streaming: bool = True) -> S:
        """Run block by block (``True``), carrying state across calls, or offline (``False``).

        Switching either way clears the state. A :class:`~torchbend.BendedModule` bakes the
        mode into its graphs: trace after switching.
        """
        for part in self._stateful_parts():
            setattr(part, "streaming", streaming)  # noqa: B010 (a flag nn.Module does not type)
        self.reset_cache()
        return self

    def reset_cache(self) -> None:
        """Forget the past of a stream: the next block starts from silence."""
        for part in self._stateful_parts():
            part.reset_cache()  # type: ignore[operator]

    def _stateful_parts(self) -> list[nn.Module]:
        return [
            m
            for m in self.modules()
            if m is not self and hasattr(m, "streaming") and hasattr(m, "reset_cache")
        ]
