"""Discovery: find which activations and channels move a descriptor of the sound."""

from .rank import ChannelEffect, Ranking, rank

__all__ = ["ChannelEffect", "Ranking", "rank"]
