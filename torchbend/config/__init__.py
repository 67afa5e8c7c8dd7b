"""Bending configurations and sweep specifications: the files users write, their JSON schemas,
and the one check and error formatter both go through."""

from .bending_config import BendingConfig, ConfigItem
from .schema import FORMAT, VERSION

__all__ = ["FORMAT", "VERSION", "BendingConfig", "ConfigItem"]
