"""Discovery: find what is worth bending in a model, and turn it into a bending."""

from .steering import steer_between, steering_vector

__all__ = ["steer_between", "steering_vector"]
