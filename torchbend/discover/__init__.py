"""Discovery: find what is worth bending in a model, and what a bending did to it."""

from .health import HealthReport, HealthRow, RunStats, health

__all__ = ["HealthReport", "HealthRow", "RunStats", "health"]
