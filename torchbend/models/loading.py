"""Load the models shipped with torchbend, with their trained weights."""

from __future__ import annotations

import json
from pathlib import Path

from torch import nn

from ..errors import TorchbendError, WeightsError, did_you_mean
from .tiny_rave import TinyRave

__all__ = ["MODELS", "WeightsError", "default_weights", "load"]

ASSETS = Path(__file__).resolve().parents[2] / "assets"

MODELS: dict[str, type[nn.Module]] = {"tiny_rave": TinyRave}
"""The shipped models by name; ``assets/<name>.safetensors`` holds each one's weights."""


def default_weights(name: str) -> Path:
    """The path of the weights shipped for model ``name``."""
    return ASSETS / f"{name}.safetensors"


def load(name: str = "tiny_rave", weights: str | Path | None = None) -> nn.Module:
    """Build a shipped model, load its trained weights, and return it in eval mode.

    The safetensors file carries the model's constructor arguments in its metadata
    (``config``, JSON), so a model trained with other sizes loads as trained.

    Args:
        name (str): model name, one of :data:`MODELS`.
        weights (str | Path | None): a safetensors file; ``None`` for the shipped weights
            (``assets/<name>.safetensors`` in the source tree).

    Raises:
        TorchbendError: ``name`` is not a shipped model.
        WeightsError: the file is missing, not safetensors, or its tensors do not fit the model.

    >>> model = load("tiny_rave")
    >>> model.training, model.ratio
    (False, 16)
    """
    if name not in MODELS:
        raise TorchbendError(
            f"no shipped model named {name!r}; the models are {sorted(MODELS)}"
            + did_you_mean(name, MODELS)
        )
    path = Path(weights) if weights is not None else default_weights(name)
    if not path.is_file():
        raise WeightsError(
            f"weights file {str(path)!r} for model {name!r} not found; expected a safetensors "
            f"file (train one with scripts/train_model.py)"
        )
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            state = {key: f.get_tensor(key) for key in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise WeightsError(
            f"weights file {str(path)!r} for model {name!r} is not a readable safetensors "
            f"file ({e})"
        ) from e
    try:
        config = json.loads(metadata.get("config", "{}"))
        model = MODELS[name](**config)
    except (TypeError, ValueError) as e:
        raise WeightsError(
            f"weights file {str(path)!r} has a config the {name!r} model does not take: "
            f"{metadata.get('config')!r} ({e})"
        ) from e
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        raise WeightsError(
            f"weights file {str(path)!r} does not fit model {name!r}: {e}".replace("\n", " ")
        ) from e
    return model.eval()
