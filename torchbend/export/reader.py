"""Read the controls' metadata of an exported TorchScript or nn~ file with the standard library.

This module imports nothing but the standard library, neither torch nor torchbend: copy the
file alone into a host's project (an interface builder, a patch generator) to list the
controls of a file where neither is installed::

    from reader import read_controls

    for control in read_controls("bent.ts"):
        print(control["name"], control["widget"]["kind"], control["limits"])

Its errors are therefore plain ``ValueError``s (and ``OSError``s for files that cannot be
read), not torchbend's.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["CONTROLS_FILE", "FORMAT", "VERSION", "read_controls", "read_latency", "read_metadata"]

CONTROLS_FILE = "torchbend/controls.json"
"""The extra file of an export that holds its controls' metadata: ``torch.jit.save`` writes
it as ``<archive>/extra/torchbend/controls.json`` in the file, a zip archive."""

FORMAT = "torchbend.controls"
"""The ``format`` field of the metadata."""

VERSION = 1
"""The ``version`` of the metadata this module writes and reads."""


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The controls' metadata of the TorchScript or nn~ file at ``path``: ``{"format",
    "version", "getters", "controls"}``, as docs/export.md ("Control metadata") describes it.

    Raises:
        ValueError: the file is not a TorchScript archive, holds no torchbend metadata (it was
            exported by something else, or by a torchbend without it), or metadata of another
            format or of a newer version.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            suffix = "/extra/" + CONTROLS_FILE
            names = [n for n in archive.namelist() if n.endswith(suffix)]
            if not names:
                raise ValueError(
                    f"{path} holds no torchbend controls metadata (no {CONTROLS_FILE} among "
                    "its extra files): it was not exported by torchbend's torchscript or "
                    "nntilde, or by a version without metadata"
                )
            text = archive.read(names[0]).decode("utf-8")
    except zipfile.BadZipFile:
        raise ValueError(
            f"{path} is not a TorchScript file (TorchScript files are zip archives)"
        ) from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{path}: its {CONTROLS_FILE} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: its {CONTROLS_FILE} is not of the format {FORMAT!r}")
    version = data.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise ValueError(
            f"{path}: its controls metadata has version {version!r}; this reader reads "
            f"version {VERSION} (take the reader of the torchbend that wrote the file)"
        )
    return data


def read_controls(path: str | Path) -> list[dict[str, Any]]:
    """The controls of the TorchScript or nn~ file at ``path``, one dict each: ``name``,
    ``type``, ``value``, ``range``, ``limits``, ``clamp``, ``widget``, ``setter`` and
    ``getter`` (see :func:`read_metadata` for the errors).
    """
    controls: list[dict[str, Any]] = read_metadata(path)["controls"]
    return controls


def read_latency(path: str | Path) -> dict[str, int]:
    """The delays the nn~ file at ``path`` declares, in samples: ``model`` (the model's own
    delay), ``fifo_block`` (the block of the FIFO it carries, ``0`` for none: buffers of fewer
    samples are delayed by one block) and ``smallest_buffer`` (the largest ratio of its methods,
    the smallest buffer nn~ gives it). See :func:`read_metadata` for the errors; a file
    written without them (a TorchScript export, an older nn~ export) raises ``ValueError``.
    """
    latency = read_metadata(path).get("latency")
    keys = ("model", "fifo_block", "smallest_buffer")
    if not isinstance(latency, dict) or not all(isinstance(latency.get(k), int) for k in keys):
        raise ValueError(
            f"{path}: its metadata gives no latency (only nn~ files exported by a torchbend "
            "with a FIFO for small buffers do): export it again"
        )
    return {k: int(latency[k]) for k in keys}
