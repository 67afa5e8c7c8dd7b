"""The atlas as a page: what each render shows (its bendings, axes and measures, as text) and
the page itself, its files (``atlas_page/``) and its data inlined into one HTML file that works
from disk with no network."""

from __future__ import annotations

import json
import math
import re
from html import escape
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from .atlas_map import number

__all__ = ["page", "page_data"]

_AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")


def _text(value: Any) -> str:
    """A value of a config or an axis, short and readable: ``0.3``, ``'rms'``, ``$depth``."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, dict):
        if "callback" in value and len(value) == 1:
            return _callback_text(value["callback"])
        if "tuple" in value and len(value) == 1 and isinstance(value["tuple"], list):
            return "(" + ", ".join(_text(v) for v in value["tuple"]) + ")"
        if "control" in value:
            scale, offset = value.get("scale", 1.0), value.get("offset", 0.0)
            mix = (f"*{_text(scale)}" if scale != 1.0 else "") + (
                f"{'+' if number(offset) >= 0 else ''}{_text(offset)}" if offset != 0.0 else ""
            )
            return f"${value['control']}{mix}"
        return "{" + ", ".join(f"{k}={_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _callback_text(callback: Any) -> str:
    if not isinstance(callback, dict):
        return _text(callback)
    args = callback.get("args") or {}
    inner = ", ".join(f"{k}={_text(v)}" for k, v in args.items()) if isinstance(args, dict) else ""
    return f"{callback.get('class', '?')}({inner})"


def _bending_lines(config: Any) -> list[str]:
    """One line per bending: ``Noise(std=0.3, seed=3) @ ^decoder_1$``, then its options."""
    if not isinstance(config, dict) or not isinstance(config.get("bendings"), list):
        return []
    lines = []
    for bending in config["bendings"]:
        if not isinstance(bending, dict):
            continue
        patterns = bending.get("patterns") or []
        line = _callback_text(bending.get("callback"))
        line += " @ " + ", ".join(str(p) for p in patterns) if patterns else ""
        if bending.get("fn") is not None:
            line += f" in {_text(bending['fn'])}"
        for key, value in bending.items():
            if key not in ("callback", "patterns", "fn", "keys"):
                line += f" {key}={_text(value)}"
        lines.append(line)
    return lines


def _round(value: float, digits: int = 6) -> float | None:
    return float(f"{value:.{digits}g}") if math.isfinite(value) else None


def _unbent(out: Path, index: Any, source: str) -> str | None:
    """The unbent render of an input, relative to ``out``, if the sweep wrote one."""
    if not isinstance(index, int) or isinstance(index, bool):
        return None
    stem = Path(source.replace("\\", "/")).stem
    for suffix in _AUDIO_SUFFIXES:
        name = f"unbent/{index:02d}-{stem}{suffix}"
        if (out / name).is_file():
            return name
    return None


def page_data(
    rows: list[dict[str, Any]],
    out: Path,
    axis_labels: tuple[str, str],
    explained: tuple[float, float],
    loadings: dict[str, tuple[float, float]],
    ids: list[str],
    xy: np.ndarray,
    kinds: list[str],
    values: np.ndarray,
    names: list[str],
    colour: str | None,
    strip: float | None,
    title: str,
    effects: list[str] | None = None,
) -> dict[str, Any]:
    """What the page shows, as the JSON its script reads: one record per render. ``names``
    are the columns of ``values``: the measures, then the descriptor effects (``effects``,
    drawn on a diverging scale)."""
    inputs: dict[tuple[str, Any], int] = {}
    for row in rows:
        inputs.setdefault((str(row.get("input", "?")), row.get("input_index")), len(inputs))
    flags: dict[str, None] = {}
    for row in rows:
        for name in row.get("flags") or {}:
            flags.setdefault(str(name), None)
    records = []
    for i, row in enumerate(rows):
        axes = row.get("axes")
        axes = axes if isinstance(axes, dict) else {}
        error = row.get("error")
        records.append(
            {
                "id": ids[i],
                "x": _round(float(xy[i, 0]), 7),
                "y": _round(float(xy[i, 1]), 7),
                "kind": kinds[i],
                "broken": bool(row.get("broken")) or kinds[i] == "failed",
                "input": inputs[(str(row.get("input", "?")), row.get("input_index"))],
                "audio": row.get("audio") if isinstance(row.get("audio"), str) else None,
                "axes": [[str(k), _text(v)] for k, v in axes.items()],
                "bendings": _bending_lines(row.get("config")),
                "m": [_round(float(v)) for v in values[i]],
                "flags": [str(k) for k, v in (row.get("flags") or {}).items() if v],
                "error": None if error is None else str(error),
            }
        )
    return {
        "title": title,
        "measures": names,
        "effects": list(effects or []),
        "colour": colour,
        "flags": list(flags),
        "inputs": [
            {
                "path": path,
                "name": Path(path.replace("\\", "/")).stem,
                "unbent": _unbent(out, j, path),
            }
            for path, j in inputs
        ],
        "axes": list(axis_labels),
        "explained": list(explained),
        "loadings": [[n, round(a, 4), round(b, 4)] for n, (a, b) in loadings.items()],
        "strip": strip,
        "rows": records,
    }


def _script_json(data: Any) -> str:
    """JSON that a ``<script>`` element holds safely: no ``<``, ``>`` or ``&`` in it at all.

    In JSON those characters can only be inside strings, where ``\\u003c`` means the same, so
    ``</script>`` or ``<!--`` in an id or an error message cannot end the element.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char in "<>&\u2028\u2029":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def page(data: dict[str, Any], title: str) -> str:
    """The page, self-contained: its style, script and ``data`` inlined into one HTML file."""
    parts = {
        "TITLE": escape(title),
        "DATA": _script_json(data),
        "STYLE": _asset("atlas.css"),
        "SCRIPT": _asset("atlas.js"),
    }
    return re.sub(
        r"__(TITLE|DATA|STYLE|SCRIPT)__", lambda m: parts[m.group(1)], _asset("atlas.html")
    )


def _asset(name: str) -> str:
    """A file of the page, from the package (``torchbend/sweep/atlas_page/``)."""
    return (files("torchbend.sweep") / "atlas_page" / name).read_text(encoding="utf-8")
