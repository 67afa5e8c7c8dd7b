"""Tensor arguments in configurations: numbers in the file, or a safetensors file beside it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from ..errors import BendingError

__all__ = ["DTYPES", "INLINE_MAX", "SIDE_FILE", "SideFile", "decode_tensor", "encode_tensor"]

INLINE_MAX = 4096
"""The most numbers a tensor argument writes into the configuration itself; a larger one goes
to the side file (when the configuration is saved to a file: :meth:`BendingConfig.save`)."""

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}
"""The dtypes a tensor argument may have, by the name the file writes."""

SIDE_FILE = re.compile(r"^[^/\\]+\.safetensors\Z")
"""A side file's name: a plain file name (no folder, so that it is beside the configuration)."""


class SideFile:
    """The tensors a configuration saved to ``path`` keeps beside it, in one safetensors file
    named after it (``bends.json`` keeps them in ``bends.safetensors``)."""

    def __init__(self, path: Path) -> None:
        self.name = path.with_suffix(".safetensors").name
        self.folder = path.parent
        self.tensors: dict[str, torch.Tensor] = {}

    def add(self, tensor: torch.Tensor, where: str) -> str:
        """Keep ``tensor`` (an argument at ``where``) for the file; the key it is stored by."""
        key = f"{len(self.tensors)}: {where}"
        self.tensors[key] = tensor.detach().cpu().contiguous()
        return key

    def write(self) -> None:
        """Write the tensors kept, if any."""
        if not self.tensors:
            return
        try:
            from safetensors.torch import save_file
        except ImportError as e:
            raise ImportError(
                "saving a configuration with a large tensor argument needs safetensors: "
                "pip install torchbend[audio]"
            ) from e
        save_file(self.tensors, str(self.folder / self.name))


def encode_tensor(tensor: torch.Tensor, where: str, side: SideFile | None) -> dict[str, Any]:
    """``tensor`` (the argument at ``where``) as a configuration writes it: its dtype, shape
    and values as plain numbers, or, beyond :data:`INLINE_MAX` numbers with a ``side`` file to
    write, the key it is stored by there. Never pickled."""
    name = next((n for n, d in DTYPES.items() if d == tensor.dtype), None)
    if name is None:
        raise BendingError(
            f"{where}: a tensor of {tensor.dtype} cannot be saved; tensor arguments are of "
            f"{', '.join(DTYPES)}"
        )
    fields: dict[str, Any] = {"dtype": name, "shape": list(tensor.shape)}
    if side is not None and tensor.numel() > INLINE_MAX:
        fields.update(file=side.name, key=side.add(tensor, where))
    else:
        # Each float of these dtypes is a double exactly; JSON writes doubles exactly.
        fields["values"] = tensor.detach().cpu().double().reshape(-1).tolist()
    return {"tensor": fields}


def decode_tensor(fields: dict[str, Any], where: str, folder: Path | None) -> torch.Tensor:
    """The tensor :func:`encode_tensor` wrote, bit for bit; one in a side file is read from
    ``folder`` (``None``: a configuration that is not read from a file has no side file)."""
    dtype, shape = DTYPES[fields["dtype"]], list(fields["shape"])
    if "values" in fields:
        values = torch.tensor(fields["values"], dtype=torch.float64)
        count = 1
        for size in shape:
            count *= size
        if values.numel() != count:
            raise BendingError(
                f"{where}: a tensor of shape {shape} holds {count} values, got {values.numel()}"
            )
        return values.to(dtype).reshape(shape)
    return _from_side_file(fields, where, folder, dtype, shape)


def _from_side_file(
    fields: dict[str, Any], where: str, folder: Path | None, dtype: torch.dtype, shape: list[int]
) -> torch.Tensor:
    name, key = fields["file"], fields["key"]
    if folder is None:
        raise BendingError(
            f"{where}: the tensor is in the side file {name!r}, which only a configuration "
            "read from its file has beside it; load it with BendingConfig.load(path)"
        )
    path = folder / name
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            tensor = f.get_tensor(key) if key in f.keys() else None
    except (SafetensorError, OSError, ValueError) as e:
        raise BendingError(
            f"{where}: cannot read the side file {str(path)!r} the tensor is in: {e}"
        ) from None
    if tensor is None:
        raise BendingError(f"{where}: the side file {str(path)!r} holds no tensor {key!r}")
    if tensor.dtype != dtype or list(tensor.shape) != shape:
        raise BendingError(
            f"{where}: the side file {str(path)!r} holds {key!r} as a {tensor.dtype} tensor "
            f"of shape {list(tensor.shape)}, but the configuration says {dtype} of {shape}"
        )
    return tensor
