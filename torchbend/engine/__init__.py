"""The bending engine: selection, rewriting, weights, bendings, the method table, and the
:class:`Engine` that builds them with their collaborators passed to their constructors."""

from .bendings import Bending, BendingSet
from .engine import Engine
from .readonly import BendedView, Restore
from .weights import WeightBank

__all__ = ["BendedView", "Bending", "BendingSet", "Engine", "Restore", "WeightBank"]
