"""Load the models shipped with torchbend, with their trained weights."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from ..errors import TorchbendError, WeightsError, did_you_mean
from .tiny_ddsp import TinyDDSP
from .tiny_rave import TinyRave

__all__ = [
    "MAX_HEADER_BYTES",
    "MODELS",
    "AllocationLimit",
    "Header",
    "TooLarge",
    "WeightsError",
    "default_weights",
    "load",
    "read_header",
]

ASSETS = Path(__file__).resolve().parents[2] / "assets"

MODELS: dict[str, type[nn.Module]] = {"tiny_rave": TinyRave, "tiny_ddsp": TinyDDSP}
"""The shipped models by name; ``assets/<name>.safetensors`` holds each one's weights."""

MAX_HEADER_BYTES = 100_000_000
"""The largest safetensors header read, in bytes (safetensors' own limit)."""

_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
_CODES = {dtype: code for code, dtype in _DTYPES.items()}


def default_weights(name: str) -> Path:
    """The path of the weights shipped for model ``name``."""
    return ASSETS / f"{name}.safetensors"


def load(name: str = "tiny_ddsp", weights: str | Path | None = None) -> nn.Module:
    """Build a shipped model, load its trained weights, and return it in eval mode.

    The safetensors file carries the model's constructor arguments in its metadata
    (``config``, JSON), so a model trained with other sizes loads as trained. The file's
    header is checked before any tensor is read: every tensor must have the name, shape and
    dtype of one of the model's, and the model built from ``config`` may not be much larger
    than the file (a crafted file cannot make it allocate more than it holds).

    Args:
        name (str): model name, one of :data:`MODELS`: ``"tiny_ddsp"`` (the default), the
            character model, whose latent channels are named (``model.latent_names``), or
            ``"tiny_rave"``, the transparent reference.
        weights (str | Path | None): a safetensors file; ``None`` for the shipped weights
            (``assets/<name>.safetensors`` in the source tree).

    Raises:
        TorchbendError: ``name`` is not a shipped model.
        WeightsError: the file is missing, not safetensors, its config builds a model far
            larger than the file, or its tensors do not fit the model (naming the tensor,
            the shape and dtype expected and found).

    >>> model = load()  # TinyDDSP
    >>> model.training, model.ratio, model.latent_names[:2]
    (False, 256, ['pitch', 'loudness'])
    >>> load("tiny_rave").ratio
    16
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
    where = f"weights file {str(path)!r}"
    try:
        header = read_header(path)
    except WeightsError as e:
        raise WeightsError(
            f"{where} for model {name!r} is not a readable safetensors file ({e})"
        ) from None
    model = _build(name, header.metadata, where, budget=4 * path.stat().st_size + 64 * 2**20)
    problems = _mismatches(model.state_dict(), header.tensors)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise WeightsError(
            f"{where} does not fit model {name!r}: {'; '.join(problems[:3])}{more}. Was it "
            f"saved from another model, or edited?"
        )
    overrun = header.overrun()
    if overrun:
        raise WeightsError(f"{where} for model {name!r} is truncated or corrupt: {overrun}")
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            state = {key: f.get_tensor(key) for key in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise WeightsError(
            f"{where} for model {name!r} is not a readable safetensors file ({e})"
        ) from e
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        raise WeightsError(f"{where} does not fit model {name!r}: {e}".replace("\n", " ")) from e
    return model.eval()


@dataclass(frozen=True)
class Header:
    """What a safetensors file declares in its header."""

    tensors: dict[str, tuple[str, list[int], int]]
    """``{name: (dtype code, shape, offset of its last byte in the data)}``."""
    metadata: dict[str, str]
    data_bytes: int
    """The bytes the file holds after its header."""

    def overrun(self) -> str | None:
        """Which tensor lies past the end of the file, if one does."""
        for key, (dtype, shape, end) in self.tensors.items():
            if end > self.data_bytes:
                return (
                    f"tensor {key!r} ({dtype} of shape {shape}) ends at byte {end} of the "
                    f"data, which holds {self.data_bytes} bytes"
                )
        return None


def read_header(path: str | Path) -> Header:
    """The tensors and metadata a safetensors file declares, read from its header alone (no
    tensor data is read, and what the header claims is not trusted yet).

    Raises:
        WeightsError: the header is not a safetensors header.
    """
    path = Path(path)
    size = path.stat().st_size
    try:
        with path.open("rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise WeightsError(f"{size} bytes, too short for a safetensors header")
            (length,) = struct.unpack("<Q", prefix)
            if length > min(MAX_HEADER_BYTES, size - 8):
                raise WeightsError(
                    f"its header claims {length} bytes, the file has {size - 8} after the "
                    f"header's length (and headers are at most {MAX_HEADER_BYTES})"
                )
            header = json.loads(f.read(length))
    except (OSError, RecursionError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise WeightsError(f"its header is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise WeightsError(f"its header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise WeightsError("its __metadata__ is not an object of strings")
    tensors: dict[str, tuple[str, list[int], int]] = {}
    for key, info in header.items():
        dtype, shape, offsets = _fields(info)
        if dtype is None or shape is None or offsets is None:
            raise WeightsError(
                f"tensor {key!r} is not described by a dtype, a shape and data_offsets: {info!r}"
            )
        tensors[key] = (dtype, shape, offsets[1])
    return Header(tensors, metadata, size - 8 - length)


def _fields(info: Any) -> tuple[str | None, list[int] | None, list[int] | None]:
    if not isinstance(info, dict):
        return None, None, None
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")

    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    ok_shape = isinstance(shape, list) and all(whole(s) for s in shape)
    ok_offsets = (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(map(whole, offsets))
        and offsets[0] <= offsets[1]
    )
    return (
        dtype if isinstance(dtype, str) else None,
        shape if ok_shape else None,
        offsets if ok_offsets else None,
    )


def _build(name: str, metadata: Mapping[str, str], where: str, budget: int) -> nn.Module:
    """The model ``name`` built with the file's config, refused if it would allocate more
    than ``budget`` bytes."""
    text = metadata.get("config", "{}")
    try:
        config = json.loads(text)
        if not isinstance(config, dict):
            raise ValueError(f"a JSON {type(config).__name__}, not an object")
        with AllocationLimit(budget):
            return MODELS[name](**config)
    except TooLarge as e:
        raise WeightsError(
            f"{where} has a config {text!r} that builds a model larger than the file can fill "
            f"({e}); the file is not a {name!r} model's"
        ) from None
    except (TypeError, ValueError) as e:
        raise WeightsError(
            f"{where} has a config the {name!r} model does not take: {text!r} ({e})"
        ) from e


def _mismatches(
    expected: Mapping[str, torch.Tensor], found: Mapping[str, tuple[str, list[int], int]]
) -> list[str]:
    """What of the file's tensors ``found`` differs from the model's ``expected``."""
    problems = []
    for key, tensor in expected.items():
        if key in found:
            dtype, shape, _ = found[key]
            want = (_CODES.get(tensor.dtype, str(tensor.dtype)), list(tensor.shape))
            if (dtype, shape) != want:
                problems.append(
                    f"tensor {key!r} is {dtype} of shape {shape} in the file, the model "
                    f"expects {want[0]} of shape {want[1]}"
                )
    missing = [k for k in expected if k not in found]
    for key in found:
        if key not in expected:
            dtype, shape, _ = found[key]
            problems.append(
                f"tensor {key!r} ({dtype} of shape {shape}) is not the model's"
                + did_you_mean(key, missing or list(expected))
            )
    if missing:
        listed = ", ".join(map(repr, missing[:5])) + (", ..." if len(missing) > 5 else "")
        problems.append(f"it lacks {len(missing)} of the model's tensors ({listed})")
    return problems


# -- the allocation limit --------------------------------------------------------------------

_FACTORIES = {
    torch.empty,
    torch.zeros,
    torch.ones,
    torch.full,
    torch.rand,
    torch.randn,
    torch.randint,
    torch.empty_strided,
}


class TooLarge(Exception):
    """Raised by :class:`AllocationLimit` for a call that would pass its budget."""


class AllocationLimit(TorchFunctionMode):
    """Within it, tensor factory calls (``torch.empty``, as layers allocate their weights,
    ``torch.zeros``, ``torch.arange``...) that would take the bytes allocated past
    ``budget`` raise :class:`TooLarge` before they allocate."""

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.left = budget
        self.budget = budget

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        count = _numel(func, args, kwargs)
        if count is not None:
            dtype = kwargs.get("dtype") or torch.get_default_dtype()
            self.left -= count * dtype.itemsize
            if self.left < 0:
                raise TooLarge(
                    f"past {self.budget / 2**20:.0f} MiB at a {func.__name__} of {count} elements"
                )
        return func(*args, **kwargs)


def _numel(func: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int | None:
    """The number of elements a factory call allocates (``None``: not a factory call)."""
    if func in _FACTORIES:
        size: Any = kwargs.get("size")
        if size is None:
            sizes = [a for a in args if isinstance(a, (tuple, list, torch.Size))]
            if sizes:
                size = sizes[0]
            elif func is not torch.randint and func is not torch.full:
                size = [a for a in args if isinstance(a, int)]
        return math.prod(int(s) for s in size) if size is not None else None
    if func is torch.arange:
        numbers = [float(a) for a in args if isinstance(a, (int, float))]
        start, end, step = 0.0, numbers[0] if numbers else 0.0, 1.0
        if len(numbers) >= 2:
            start, end = numbers[0], numbers[1]
        if len(numbers) >= 3:
            step = numbers[2]
        return max(0, math.ceil((end - start) / step)) if step else None
    if func in (torch.linspace, torch.logspace):
        steps = kwargs.get("steps", args[2] if len(args) > 2 else None)
        return int(steps) if isinstance(steps, int) else None
    if func is torch.eye:
        dims = [a for a in args if isinstance(a, int)]
        return dims[0] * (dims[1] if len(dims) > 1 else dims[0]) if dims else None
    return None
