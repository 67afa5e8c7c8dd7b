"""The studio's export: the bending on the page written as an nn~ file, checked, to download."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..audio.render import trace_audio
from ..audio.stream import reset_cache
from ..errors import StudioError, TorchbendError
from .replies import file_name

if TYPE_CHECKING:
    from .session import Studio

__all__ = ["export_nntilde", "exported_file"]

EXPORT_BLOCK = 4096
"""The length the export traces a model that does not stream on (a whole number of any
power-of-two ratio up to it)."""


def export_nntilde(studio: Studio, name: Any) -> dict[str, Any]:
    """Write the studio's bended model, with its bendings and controls, as ``NAME.ts`` in the
    studio's ``exports`` folder, as ``tb.export.nntilde`` writes it: the model as the studio
    plays it (in streaming mode when it streams, so that nn~'s buffers join without clicks),
    its method and sample rate, checked as nn~ calls it. Answers the file's name, its URL,
    the check's report and the delay it adds in nn~ at each buffer size."""
    from ..bended import BendedModule
    from ..export import latency, nntilde

    path = _path(studio, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with studio.lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unseeded callbacks: saved with the seed they drew
        config = studio.bended.bending_config()
        # A module of its own, traced once as nn~ calls it: the studio's renders trace the
        # model on other lengths, whose graphs an nn~ file (one graph per method) cannot hold.
        # From a clean state: the renders leave caches sized for their sounds, on which the
        # trace would bake other decisions than the silence an nn~ file starts from.
        reset_cache(studio.bended.module)
        bended = BendedModule(studio.bended.module)
        example = torch.zeros(1, 1, studio.block_size or EXPORT_BLOCK)
        try:
            trace_audio(bended, studio.fn, example)
            bended.bend(config)
            report = nntilde(bended, path, [studio.fn], studio.sample_rate)
        except TorchbendError as e:
            raise StudioError(f"the bending cannot be exported for nn~: {e}") from None
    return {
        "name": path.name,
        "url": f"/api/exports/{path.name}",
        "path": str(path),
        "report": str(report),
        "latency": str(latency(path)).replace(str(path), path.name),
    }


def exported_file(studio: Studio, file: str) -> Path:
    """The exported file named ``file`` (``NAME.ts``), for download."""
    path = _path(studio, file.removesuffix(".ts"))
    if not path.is_file():
        raise StudioError(f"no exported file {file!r}: export one first (POST /api/export)", 404)
    return path


def _path(studio: Studio, name: Any) -> Path:
    return studio.output / "exports" / f"{file_name(name, 'an exported file')}.ts"
