"""The ``torchbend`` command: inspect, bend, export, check, play live, list, and the demo."""

from .main import build_parser, main
from .resolve import load_model, parse_bend, parse_shape

__all__ = ["build_parser", "load_model", "main", "parse_bend", "parse_shape"]
