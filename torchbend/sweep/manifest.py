"""A sweep's folder: its manifest of renders, its description, and how they are written.

The manifest is **JSON Lines** (``manifest.jsonl``, one row per render): a row is appended,
flushed and synced to disk as soon as its audio file is in place, so a sweep killed at any
moment leaves every finished render recorded and at most one partial last line, which the next
run drops (and renders that row again). Parquet cannot be appended to: it would have to be
rewritten whole after each render or kept in memory until the end, which is what a kill loses.
JSON Lines also needs no dependency, reads with one line of any language, and holds each
row's nested bending configuration as it is. :func:`table` gives a pandas DataFrame of it
where pandas is installed.

The folder::

    DIR/sweep.json        what was swept (the specification, its fingerprint, the inputs)
    DIR/manifest.jsonl    one row per render
    DIR/renders/*.wav     the renders
    DIR/unbent/*.wav      the unbent model's render of each input
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..config import BendingConfig
from ..errors import SweepError

__all__ = [
    "MANIFEST",
    "SWEEP",
    "Manifest",
    "intact",
    "read_rows",
    "row_config",
    "table",
    "write_atomic",
]

MANIFEST = "manifest.jsonl"
SWEEP = "sweep.json"
FORMAT = "torchbend.sweep"
VERSION = 1


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that the file is either the old one or the whole new one,
    whatever happens (a temporary file beside it, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.part")
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def intact(path: Path, frames: int) -> bool:
    """Whether the audio file at ``path`` is whole: it exists, its header reads, it holds
    ``frames`` frames, and its last frame decodes. A file cut short from outside fails (a WAV's
    header then counts the frames left, a FLAC's last frame is gone), and is rendered again;
    a render is never read whole, so checking a sweep of thousands of files takes seconds."""
    import soundfile

    try:
        if soundfile.info(str(path)).frames != frames:
            return False
        last, _ = soundfile.read(str(path), start=frames - 1, frames=1, always_2d=True)
    except (OSError, RuntimeError, ValueError):  # soundfile.LibsndfileError is a RuntimeError
        return False
    return len(last) == 1


class Manifest:
    """The rows of ``DIR/manifest.jsonl``, read at opening, and the appending of new ones.

    A last line cut short (a sweep killed while writing it) is dropped and cut off the file;
    any other line that is not a row is an error naming it, since that file was not written by
    a sweep alone.
    """

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / MANIFEST
        self.rows: dict[str, dict[str, Any]] = {}
        self.dropped = 0
        if self.path.is_file():
            self._read()

    def _read(self) -> None:
        data = self.path.read_bytes()
        *lines, tail = data.split(b"\n")
        good = 0
        for number, line in enumerate(lines, 1):
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                raise SweepError(
                    f"{self.path}, line {number}: not a manifest row ({line[:60]!r}); the file "
                    "was changed by something else than a sweep: move it away to start over"
                ) from None
            self.rows[row["id"]] = row
            good += len(line) + 1
        if tail:  # a line cut short by a kill (rows end with a newline): render it again
            self.dropped = 1
            with open(self.path, "r+b") as f:
                f.truncate(good)

    def __contains__(self, key: str) -> bool:
        return key in self.rows

    def __len__(self) -> int:
        return len(self.rows)

    def append(self, row: dict[str, Any]) -> None:
        """Add ``row`` and put it on disk before returning."""
        line = json.dumps(row, allow_nan=False, separators=(",", ":")) + "\n"
        with open(self.path, "a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self.rows[row["id"]] = row

    def compact(self, order: Iterable[str]) -> None:
        """Rewrite the manifest with its rows in ``order`` (then any others), atomically: the
        file a finished sweep leaves does not depend on which worker was fastest."""
        ordered = [self.rows[k] for k in order if k in self.rows]
        seen = {r["id"] for r in ordered}
        ordered += [r for k, r in sorted(self.rows.items()) if k not in seen]
        text = "".join(
            json.dumps(r, allow_nan=False, separators=(",", ":")) + "\n" for r in ordered
        )
        write_atomic(self.path, text.encode())


def read_rows(folder: str | Path) -> list[dict[str, Any]]:
    """The rows of a sweep's manifest, in the order of the sweep."""
    folder = Path(folder)
    if not (folder / MANIFEST).is_file():
        raise SweepError(
            f"{folder} holds no {MANIFEST}: give the folder a sweep wrote (torchbend sweep run "
            "SPEC --out DIR)"
        )
    return list(Manifest(folder).rows.values())


def row_config(row: dict[str, Any]) -> BendingConfig:
    """The bending configuration of a manifest row, to apply to a model or save."""
    return BendingConfig.from_dict(row["config"], source=f"row {row.get('id')}")


def table(folder: str | Path) -> Any:
    """The manifest as a pandas DataFrame, a column per field (measures and flags flattened
    as ``measures.distance``...). Needs pandas."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError("torchbend.sweep.table needs pandas: pip install pandas") from e
    return pandas.json_normalize(read_rows(folder))
