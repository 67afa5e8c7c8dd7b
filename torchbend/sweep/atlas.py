"""The atlas: a 2-D map of a sweep's renders, as a PNG and as a self-contained HTML page.

The map is a principal component analysis (PCA) of the renders' measures, each standardised
(z-scored) over the renders. PCA rather than t-SNE or UMAP: it is deterministic (the same
manifest gives the same map, byte for byte), needs nothing beyond numpy, and its two axes are
linear mixtures of the measures, so they can be named by their loadings
(``PC1 (41 %): loudness_lufs +0.61, rms_dbfs +0.58``) where a nonlinear embedding has axes
with no meaning. Renders that failed (no measures) are not fed to the PCA; they are lined up
in a strip to the right of the map, where they can still be inspected.

The HTML page works from disk (``file://``) with no network: its script, style and data are
inline. It lives in the sweep's folder, so the renders' ``audio`` paths, relative to that
folder, play as they are.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Atlas", "atlas"]

_CONSTANT = 1e-12
"""A measure whose spread is below this fraction of its magnitude counts as constant: its
z-scores would be rounding noise blown up to unit variance."""

_AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")


@dataclass
class Atlas:
    """What :func:`atlas` made: the files it wrote and the map behind them."""

    png: Path | None
    """The picture, ``out_dir/atlas.png``; ``None`` when not asked for."""
    html: Path | None
    """The page, ``out_dir/atlas.html``; ``None`` when not asked for."""
    coords: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Each render's position, by row id; failed renders sit in the strip right of the map."""
    explained: tuple[float, float] = (0.0, 0.0)
    """The fraction of the standardised measures' variance each axis explains."""
    loadings: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Each measure's weight on each axis (unit-norm components); constant measures are left
    out."""

    def axis_label(self, axis: int) -> str:
        """The name of axis 0 or 1: its share of variance and its two largest loadings."""
        weights = sorted(self.loadings.items(), key=lambda kv: -abs(kv[1][axis]))
        terms = ", ".join(f"{name} {w[axis]:+.2f}" for name, w in weights[:2] if w[axis] != 0)
        head = f"PC{axis + 1} ({100 * self.explained[axis]:.0f} %)"
        return f"{head}: {terms}" if terms else f"{head}: no varying measure"


def atlas(
    rows: list[dict[str, Any]],
    out_dir: str | Path,
    *,
    png: bool = True,
    html: bool = True,
    title: str = "torchbend sweep",
) -> Atlas:
    """Map a sweep's renders in 2-D and write the map as a picture and as an interactive page.

    Args:
        rows (list[dict]): the manifest's rows (``manifest.jsonl``), one per render.
        out_dir (str | Path): the sweep's folder, which the rows' ``audio`` paths are relative
            to; ``atlas.png`` and ``atlas.html`` are written there.
        png (bool): write ``atlas.png`` (needs matplotlib: ``pip install 'torchbend[plot]'``).
        html (bool): write ``atlas.html``, a page to hover, filter and play the renders.
        title (str): the title of both.

    Returns:
        Atlas: the files written, each row's position, and what the axes mean.

    Example:
        >>> import tempfile
        >>> rows = [{"id": f"r{i}", "measures": {"rms_dbfs": -20.0 + i, "flatness": i % 2}}
        ...         for i in range(4)]
        >>> result = atlas(rows, tempfile.mkdtemp(), png=False)
        >>> result.html.name, len(result.coords), round(sum(result.explained), 6)
        ('atlas.html', 4, 1.0)
    """
    out = Path(out_dir)
    ids = [str(row.get("id", i)) for i, row in enumerate(rows)]
    names = _measure_names(rows)
    values = np.array(
        [[_number((row.get("measures") or {}).get(n)) for n in names] for row in rows],
        dtype=float,
    ).reshape(len(rows), len(names))
    usable = np.isfinite(values).any(axis=1)
    positions, explained, loadings = _pca(values[usable], names)
    xy = np.zeros((len(rows), 2))
    xy[usable] = positions
    xy[~usable], strip = _strip(positions, int((~usable).sum()))
    result = Atlas(
        png=None,
        html=None,
        coords={i: (float(x), float(y)) for i, (x, y) in zip(ids, xy)},
        explained=explained,
        loadings=loadings,
    )
    kinds = [
        "failed" if not ok else "broken" if row.get("broken") else "ok"
        for row, ok in zip(rows, usable)
    ]
    colour = "distance" if "distance" in names else names[0] if names else None
    if png or html:
        out.mkdir(parents=True, exist_ok=True)
    if png:
        result.png = out / "atlas.png"
        colours = values[:, names.index(colour)] if colour else np.full(len(rows), np.nan)
        _draw_png(result.png, result, ids, xy, kinds, colours, colour, strip, title)
    if html:
        result.html = out / "atlas.html"
        data = _page_data(rows, out, result, ids, xy, kinds, values, names, colour, strip, title)
        result.html.write_text(_page(data, title), encoding="utf-8")
    return result


# -- the map --------------------------------------------------------------------------------


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value) if math.isfinite(value) else math.nan


def _measure_names(rows: list[dict[str, Any]]) -> list[str]:
    """The numeric measures of any row, in order of first appearance."""
    names: dict[str, None] = {}
    for row in rows:
        for name, value in (row.get("measures") or {}).items():
            if not math.isnan(_number(value)):
                names.setdefault(str(name), None)
    return list(names)


def _pca(
    values: np.ndarray, names: list[str]
) -> tuple[np.ndarray, tuple[float, float], dict[str, tuple[float, float]]]:
    """The first two principal components of the z-scored measures, with fixed signs.

    A measure a row lacks takes the measure's mean (a z-score of 0: no pull either way). Each
    component's sign makes its largest loading positive, so the map never flips at random.
    """
    coords = np.zeros((values.shape[0], 2))
    if values.size == 0:
        return coords, (0.0, 0.0), {}
    present = np.isfinite(values)
    counts = present.sum(axis=0)
    means = np.where(present, values, 0.0).sum(axis=0) / np.maximum(counts, 1)
    filled = np.where(present, values, means)
    spread = filled.max(axis=0) - filled.min(axis=0)
    scale = np.maximum(np.abs(filled).max(axis=0), 1.0)
    keep = spread > _CONSTANT * scale
    if not keep.any():
        return coords, (0.0, 0.0), {}
    kept = filled[:, keep]
    z = (kept - kept.mean(axis=0)) / kept.std(axis=0)
    _, s, vt = np.linalg.svd(z, full_matrices=False)
    variance = s**2
    explained = [0.0, 0.0]
    components = np.zeros((2, z.shape[1]))
    for c in range(min(2, len(s))):
        if s[c] <= _CONSTANT * s[0]:
            break  # the rows span fewer dimensions: this direction is arbitrary
        component = vt[c] * (1.0 if vt[c][np.argmax(np.abs(vt[c]))] > 0 else -1.0)
        components[c] = component
        explained[c] = float(variance[c] / variance.sum())
    coords = z @ components.T
    kept_names = [n for n, k in zip(names, keep) if k]
    loadings = {
        n: (float(components[0, j]), float(components[1, j])) for j, n in enumerate(kept_names)
    }
    return coords, (explained[0], explained[1]), loadings


def _strip(positions: np.ndarray, count: int) -> tuple[np.ndarray, float | None]:
    """Places for ``count`` failed renders: columns right of the map, and the x of the border."""
    if count == 0:
        return np.zeros((0, 2)), None
    if len(positions):
        (x0, y0), (x1, y1) = positions.min(axis=0), positions.max(axis=0)
    else:
        x0, y0, x1, y1 = -1.0, -1.0, 1.0, 1.0
    width = x1 - x0 if x1 > x0 else 1.0
    if y1 <= y0:
        y0, y1 = y0 - 1.0, y1 + 1.0
    per_column = max(40, math.ceil(count / 4))  # at most four columns, however many failed
    tall = min(count, per_column)
    place = np.zeros((count, 2))
    for i in range(count):
        column, row = divmod(i, per_column)
        place[i, 0] = x1 + width * (0.1 + 0.035 * column)
        place[i, 1] = y1 - (y1 - y0) * (row / (tall - 1) if tall > 1 else 0.5)
    return place, float(x1 + width * 0.06)


# -- the picture ----------------------------------------------------------------------------


def _draw_png(
    path: Path,
    result: Atlas,
    ids: list[str],
    xy: np.ndarray,
    kinds: list[str],
    colours: np.ndarray,
    colour: str | None,
    strip: float | None,
    title: str,
) -> None:
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(
            "the atlas picture needs matplotlib: pip install 'torchbend[plot]' "
            "(or call atlas(..., png=False) for the page alone)"
        ) from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kind = np.array(kinds)
    size = 36 if len(ids) <= 300 else 14
    fig, ax = plt.subplots(figsize=(10, 7.5))
    ax.axhline(0, color="#dddddd", lw=0.8, zorder=0)
    ax.axvline(0, color="#dddddd", lw=0.8, zorder=0)
    ok = kind == "ok"
    coloured = ok & np.isfinite(colours)
    if coloured.any():
        points = ax.scatter(
            xy[coloured, 0],
            xy[coloured, 1],
            c=colours[coloured],
            cmap="viridis",
            s=size,
            edgecolors="white",
            linewidths=0.4,
            label=f"render (colour: {colour})",
        )
        fig.colorbar(points, ax=ax, fraction=0.04, pad=0.02).set_label(str(colour))
    if (ok & ~coloured).any():
        plain = ok & ~coloured
        ax.scatter(xy[plain, 0], xy[plain, 1], c="#999999", s=size, label="render (no colour)")
    broken = kind == "broken"
    if broken.any():
        ax.scatter(
            xy[broken, 0], xy[broken, 1], marker="x", c="#d62728", s=size * 1.3, lw=1.4,
            label="broken (flagged)",
        )  # fmt: skip
    failed = kind == "failed"
    if failed.any():
        ax.scatter(
            xy[failed, 0], xy[failed, 1], marker="s", facecolors="none", edgecolors="#555555",
            s=size, label="failed (no measures)",
        )  # fmt: skip
    if strip is not None:
        ax.axvline(strip, color="#888888", ls="--", lw=0.8)
        ax.text(strip, 0.99, " failed", transform=ax.get_xaxis_transform(), va="top",
                ha="left", fontsize=8, color="#555555")  # fmt: skip
        left, right = ax.get_xlim()  # no ticks over the strip: its x means nothing
        ax.set_xticks([t for t in ax.get_xticks() if left <= t < strip])
        ax.set_xlim(left, right)
    ax.set_xlabel(result.axis_label(0))
    ax.set_ylabel(result.axis_label(1))
    counts = {k: kinds.count(k) for k in ("broken", "failed")}
    ax.set_title(
        f"{title}: {len(ids)} render{'s' * (len(ids) != 1)} "
        f"({counts['broken']} broken, {counts['failed']} failed)"
    )
    if len(ids):
        ax.legend(loc="best", fontsize=8, framealpha=0.9)
    ax.grid(True, color="#f0f0f0", lw=0.6)
    ax.set_axisbelow(True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# -- the page -------------------------------------------------------------------------------


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
                f"{'+' if _number(offset) >= 0 else ''}{_text(offset)}" if offset != 0.0 else ""
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


def _page_data(
    rows: list[dict[str, Any]],
    out: Path,
    result: Atlas,
    ids: list[str],
    xy: np.ndarray,
    kinds: list[str],
    values: np.ndarray,
    names: list[str],
    colour: str | None,
    strip: float | None,
    title: str,
) -> dict[str, Any]:
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
        "axes": [result.axis_label(0), result.axis_label(1)],
        "explained": list(result.explained),
        "loadings": [[n, round(a, 4), round(b, 4)] for n, (a, b) in result.loadings.items()],
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


def _page(data: dict[str, Any], title: str) -> str:
    parts = {"TITLE": escape(title), "DATA": _script_json(data)}
    return re.sub(r"__(TITLE|DATA)__", lambda m: parts[m.group(1)], _PAGE)


_PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>
:root { --ink: #1d2330; --mute: #667085; --line: #d0d5dd; --accent: #2563eb; --bad: #d62728; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, "Segoe UI", Roboto, sans-serif; color: var(--ink);
  background: #f6f7f9; }
header { padding: 10px 18px; background: #fff; border-bottom: 1px solid var(--line); }
h1 { font-size: 18px; margin: 0; }
#summary { margin: 0; color: var(--mute); }
main { display: flex; gap: 14px; padding: 12px 18px; align-items: flex-start; }
#plot-area { flex: 1 1 auto; min-width: 0; }
#controls { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 18px;
  margin-bottom: 8px; }
#hide { display: flex; flex-wrap: wrap; gap: 2px 12px; align-items: center; }
#hide b { font-weight: 600; }
#count { font-weight: 600; margin-left: auto; }
select, input, button { font: inherit; }
button { padding: 3px 10px; }
#figure { position: relative; background: #fff; border: 1px solid var(--line); border-radius: 6px; }
#map { display: block; width: 100%; height: auto; }
#map:focus { outline: none; }
#map:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; }
.box { fill: none; stroke: #98a2b3; }
.grid { stroke: #eef0f3; }
.zero { stroke: #c9ced6; }
.tick { font-size: 11px; fill: var(--mute); }
.label { font-size: 13px; fill: var(--ink); }
.sep { stroke: #98a2b3; stroke-dasharray: 4 3; }
.pt { stroke: #fff; stroke-width: 0.5; }
.pt.broken { stroke: var(--bad); stroke-width: 1.8; fill: none; }
.pt.failed { fill: none; stroke: #555; stroke-width: 1.2; }
.ring { fill: none; stroke: var(--ink); stroke-width: 2; pointer-events: none; }
.cursor { fill: none; stroke: var(--accent); stroke-width: 1.5; stroke-dasharray: 3 2;
  pointer-events: none; }
#tip { position: absolute; pointer-events: none; z-index: 2; width: max-content; max-width: 380px;
  background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px;
  box-shadow: 0 4px 16px rgba(16, 24, 40, .16); font-size: 12px; }
.tid { font-weight: 700; font-family: ui-monospace, monospace; word-break: break-all; }
.sub { color: var(--mute); word-break: break-all; }
.bad { color: var(--bad); font-weight: 600; }
.sec { margin-top: 6px; font-size: 11px; text-transform: uppercase; letter-spacing: .04em;
  color: var(--mute); }
.mono { font-family: ui-monospace, Menlo, monospace; font-size: 12px; word-break: break-all; }
table.kv { border-collapse: collapse; }
table.kv td, table.kv th { padding: 0 10px 0 0; text-align: left; font-weight: normal; }
table.kv .num { text-align: right; font-variant-numeric: tabular-nums; }
aside { flex: 0 0 340px; position: sticky; top: 10px; background: #fff; padding: 12px;
  border: 1px solid var(--line); border-radius: 6px; max-height: calc(100vh - 20px);
  overflow: auto; }
aside h2 { font-size: 15px; margin: 0 0 6px; }
#now { font-weight: 600; min-height: 1.4em; word-break: break-all; }
#now.playing { color: var(--accent); }
audio { width: 100%; margin: 6px 0; }
#legend { display: flex; flex-wrap: wrap; gap: 6px 18px; align-items: center; margin-top: 8px;
  color: var(--mute); font-size: 12px; }
#legend svg { vertical-align: middle; margin-right: 4px; }
.bar { display: inline-block; width: 140px; height: 10px; border-radius: 2px; margin: 0 6px;
  vertical-align: middle; }
#keys { color: var(--mute); font-size: 12px; margin: 6px 0 0; }
@media (max-width: 900px) {
  main { flex-direction: column; }
  aside { position: static; width: 100%; flex-basis: auto; max-height: none; }
}
</style>
</head>
<body>
<header>
<h1>__TITLE__</h1>
<p id="summary"></p>
</header>
<main>
<section id="plot-area" aria-label="map of the renders">
<div id="controls">
<div id="hide" role="group" aria-label="hide renders"><b>hide</b></div>
<label>input <select id="input"></select></label>
<label>colour <select id="colour"></select></label>
<label>search <input id="search" type="search" placeholder="id, bending, error" size="16"></label>
<output id="count" aria-live="polite"></output>
</div>
<div id="figure">
<svg id="map" tabindex="0" role="application" aria-describedby="keys"
  aria-label="map of the renders: arrow keys move between points, Enter plays"></svg>
<div id="tip" role="tooltip" hidden></div>
</div>
<div id="legend"></div>
<p id="keys">Hover a point for its bending and measures, click it to play its render.
Keys, once the map has focus: arrows move between points, n and p go to the next and
previous, Enter plays, u plays the unbent input, Escape stops.</p>
</section>
<aside aria-label="the selected render">
<h2>Player</h2>
<div id="now" aria-live="polite">Click a point to play its render.</div>
<audio id="player" controls preload="metadata"></audio>
<button id="unbent" type="button" disabled>play the unbent input</button>
<div id="details"></div>
<details id="axes"><summary>What the axes weigh</summary><table class="kv" id="loadings">
</table></details>
</aside>
</main>
<script type="application/json" id="atlas-data">__DATA__</script>
<script>
"use strict";
(() => {
  const data = JSON.parse(document.getElementById("atlas-data").textContent);
  const rows = data.rows;
  const NS = document.getElementById("map").namespaceURI;
  const W = 960, H = 600, L = 66, R = 18, T = 18, B = 58;
  const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779",
    "#6ece58", "#b5de2b", "#fde725"];
  const $ = (id) => document.getElementById(id);
  const svg = $("map"), tip = $("tip"), player = $("player"), unbent = $("unbent");

  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "-";
    if (typeof v !== "number") return String(v);
    if (v !== 0 && (Math.abs(v) >= 1e6 || Math.abs(v) < 1e-3)) return v.toExponential(2);
    return String(+v.toPrecision(4));
  }
  function ticks(a, b, n) {
    const raw = (b - a) / n, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
    const step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag, out = [];
    for (let k = Math.ceil(a / step); k * step <= b; k++) out.push(k * step);
    return out;
  }
  function mix(a, b, f) {
    let out = "#";
    for (const k of [1, 3, 5]) {
      const p = parseInt(a.slice(k, k + 2), 16), q = parseInt(b.slice(k, k + 2), 16);
      out += Math.round(p + (q - p) * f).toString(16).padStart(2, "0");
    }
    return out;
  }
  function ramp(t) {
    const s = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
    const i = Math.min(VIRIDIS.length - 2, Math.floor(s));
    return mix(VIRIDIS[i], VIRIDIS[i + 1], s - i);
  }
  function encoded(path) {
    return path.split("/").map(encodeURIComponent).join("/");
  }

  // -- the frame: bounds, grid, axis names, the strip of failed renders
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const r of rows) {
    x0 = Math.min(x0, r.x); x1 = Math.max(x1, r.x); y0 = Math.min(y0, r.y); y1 = Math.max(y1, r.y);
  }
  if (!(x1 - x0 > 1e-9)) { x0 = (rows.length ? x0 : 0) - 1; x1 = x0 + 2; }
  if (!(y1 - y0 > 1e-9)) { y0 = (rows.length ? y0 : 0) - 1; y1 = y0 + 2; }
  const padX = (x1 - x0) * 0.04, padY = (y1 - y0) * 0.06;
  x0 -= padX; x1 += padX; y0 -= padY; y1 += padY;
  const sx = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = (y) => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const frame = svgEl("g", {});
  const limit = data.strip === null ? x1 : data.strip;
  for (const t of ticks(x0, x1, 8)) {
    if (t > limit) continue;
    const X = sx(t).toFixed(1);
    frame.append(svgEl("line", {x1: X, x2: X, y1: T, y2: H - B, class: t ? "grid" : "zero"}));
    frame.append(svgEl("text", {x: X, y: H - B + 16, class: "tick", "text-anchor": "middle"},
      fmt(t)));
  }
  for (const t of ticks(y0, y1, 6)) {
    const Y = sy(t).toFixed(1);
    frame.append(svgEl("line", {x1: L, x2: W - R, y1: Y, y2: Y, class: t ? "grid" : "zero"}));
    frame.append(svgEl("text", {x: L - 6, y: +Y + 4, class: "tick", "text-anchor": "end"},
      fmt(t)));
  }
  frame.append(svgEl("rect", {x: L, y: T, width: W - L - R, height: H - T - B, class: "box"}));
  frame.append(svgEl("text", {x: L + (W - L - R) / 2, y: H - 16, class: "label",
    "text-anchor": "middle"}, data.axes[0]));
  frame.append(svgEl("text", {x: 0, y: 0, class: "label", "text-anchor": "middle",
    transform: `translate(16 ${T + (H - T - B) / 2}) rotate(-90)`}, data.axes[1]));
  if (data.strip !== null) {
    const X = sx(data.strip).toFixed(1);
    frame.append(svgEl("line", {x1: X, x2: X, y1: T, y2: H - B, class: "sep"}));
    frame.append(svgEl("text", {x: +X + 6, y: T + 14, class: "tick"}, "failed"));
  }
  svg.append(frame);

  // -- the points
  const size = rows.length > 500 ? 3 : 5;
  const layer = svgEl("g", {id: "points"});
  const nodes = rows.map((r, i) => {
    const X = sx(r.x), Y = sy(r.y), a = (X - size).toFixed(1), b = (X + size).toFixed(1);
    const c = (Y - size).toFixed(1), d = (Y + size).toFixed(1);
    r.X = X; r.Y = Y; r.v = true;
    let n;
    if (r.kind === "broken") n = svgEl("path", {d: `M${a},${c}L${b},${d}M${a},${d}L${b},${c}`});
    else if (r.kind === "failed") {
      n = svgEl("rect", {x: a, y: c, width: 2 * size, height: 2 * size});
    } else n = svgEl("circle", {cx: X.toFixed(1), cy: Y.toFixed(1), r: size});
    n.setAttribute("class", r.kind === "ok" ? "pt" : `pt ${r.kind}`);
    n.setAttribute("data-i", i);
    n.setAttribute("data-id", r.id);
    layer.append(n);
    return n;
  });
  svg.append(layer);
  const ring = svgEl("circle", {r: size + 4, class: "ring", visibility: "hidden"});
  const cursorRing = svgEl("circle", {r: size + 7, class: "cursor", visibility: "hidden"});
  svg.append(ring, cursorRing);

  // -- what a render is: the tooltip and the player's panel
  function section(box, title) { box.append(el("div", "sec", title)); }
  function describe(r, box) {
    box.replaceChildren();
    const input = data.inputs[r.input];
    box.append(el("div", "tid", r.id), el("div", "sub", `input: ${input.path}`));
    if (r.kind === "failed") box.append(el("div", "bad", `failed: ${r.error || "no measures"}`));
    else if (r.broken) box.append(el("div", "bad", `broken: ${r.flags.join(", ") || "flagged"}`));
    if (r.axes.length) {
      section(box, "axes");
      for (const [k, v] of r.axes) box.append(el("div", "mono", `${k} = ${v}`));
    }
    section(box, "bendings");
    if (!r.bendings.length) box.append(el("div", "sub", "none"));
    for (const line of r.bendings) box.append(el("div", "mono", line));
    if (r.m.some((v) => v !== null)) {
      section(box, "measures");
      const table = el("table", "kv");
      data.measures.forEach((name, j) => {
        if (r.m[j] === null) return;
        const tr = el("tr");
        tr.append(el("td", "", name), el("td", "num", fmt(r.m[j])));
        table.append(tr);
      });
      box.append(table);
    }
    if (data.flags.length) {
      section(box, "flags");
      box.append(r.flags.length ? el("div", "bad", r.flags.join(", ")) : el("div", "sub", "none"));
    }
  }
  function showTip(i) {
    if (i < 0) { tip.hidden = true; return; }
    describe(rows[i], tip);
    tip.hidden = false;
    const m = svg.getScreenCTM(), box = $("figure").getBoundingClientRect();
    const px = m.a * rows[i].X + m.e - box.left, py = m.d * rows[i].Y + m.f - box.top;
    const w = tip.offsetWidth, h = tip.offsetHeight;
    tip.style.left = `${px + 14 + w > box.width ? Math.max(0, px - 14 - w) : px + 14}px`;
    tip.style.top = `${Math.max(0, Math.min(py + 14, box.height - h))}px`;
  }

  // -- filters
  const hidden = new Set();
  function hideBox(key, text) {
    const label = el("label"), box = el("input");
    box.type = "checkbox";
    box.dataset.hide = key;
    box.addEventListener("change", () => {
      if (box.checked) hidden.add(key); else hidden.delete(key);
      apply();
    });
    label.append(box, ` ${text}`);
    $("hide").append(label);
  }
  hideBox("broken", "broken");
  if (rows.some((r) => r.kind === "failed")) hideBox("failed", "failed");
  for (const flag of data.flags) hideBox(`flag:${flag}`, flag);
  const inputSel = $("input"), colourSel = $("colour"), search = $("search");
  inputSel.append(new Option(`all (${data.inputs.length})`, "-1"));
  data.inputs.forEach((input, k) => {
    const n = rows.filter((r) => r.input === k).length;
    inputSel.append(new Option(`${input.name} (${n})`, String(k)));
  });
  for (const name of data.measures) colourSel.append(new Option(name, name));
  if (!data.measures.length) colourSel.append(new Option("none", ""));
  colourSel.value = data.colour || "";
  const texts = rows.map((r) => [r.id, data.inputs[r.input].path, r.error || "", ...r.bendings,
    ...r.axes.map((a) => a.join(" = "))].join("\n").toLowerCase());

  function visible(r, i, input, words) {
    if (hidden.has("broken") && r.broken) return false;
    if (hidden.has("failed") && r.kind === "failed") return false;
    if (r.flags.some((f) => hidden.has(`flag:${f}`))) return false;
    if (input >= 0 && r.input !== input) return false;
    return words.every((w) => texts[i].includes(w));
  }
  function apply() {
    const input = +inputSel.value, words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    rows.forEach((r, i) => {
      r.v = visible(r, i, input, words);
      nodes[i].style.display = r.v ? "" : "none";
      shown += r.v;
    });
    $("count").textContent = `${shown} of ${rows.length} shown`;
    if (hover >= 0 && !rows[hover].v) { hover = -1; showTip(-1); }
    rings();
  }
  function recolour() {
    const j = data.measures.indexOf(colourSel.value);
    let lo = Infinity, hi = -Infinity;
    for (const r of rows) {
      const v = j >= 0 ? r.m[j] : null;
      if (r.kind === "ok" && v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    }
    rows.forEach((r, i) => {
      if (r.kind !== "ok") return;
      const v = j >= 0 ? r.m[j] : null;
      const t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
      nodes[i].setAttribute("fill", v === null ? "#aab" : ramp(t));
    });
    $("scale-name").textContent = j >= 0 ? colourSel.value : "no measure";
    $("scale-lo").textContent = lo <= hi ? fmt(lo) : "";
    $("scale-hi").textContent = lo <= hi ? fmt(hi) : "";
  }
  inputSel.addEventListener("change", apply);
  colourSel.addEventListener("change", recolour);
  search.addEventListener("input", apply);

  // -- the legend, the summary and the loadings
  function icon(kind) {
    const s = svgEl("svg", {width: 14, height: 14, "aria-hidden": "true"});
    if (kind === "broken") s.append(svgEl("path", {d: "M3,3L11,11M3,11L11,3", class: "pt broken"}));
    else if (kind === "failed") {
      s.append(svgEl("rect", {x: 2.5, y: 2.5, width: 9, height: 9, class: "pt failed"}));
    } else s.append(svgEl("circle", {cx: 7, cy: 7, r: 5, class: "pt", fill: ramp(.55)}));
    return s;
  }
  const legend = $("legend"), bar = el("span", "bar");
  bar.style.background = `linear-gradient(to right, ${VIRIDIS.join(", ")})`;
  const scale = el("span");
  scale.append(el("span", "", "colour: "), el("b", "", ""), " ", el("span", "", ""), bar,
    el("span", "", ""));
  [scale.children[1].id, scale.children[2].id, scale.children[4].id] =
    ["scale-name", "scale-lo", "scale-hi"];
  legend.append(scale);
  for (const [kind, text] of [["ok", "render"], ["broken", "broken (flagged)"],
    ["failed", "failed (no measures, in the strip)"]]) {
    const item = el("span");
    item.append(icon(kind), text);
    legend.append(item);
  }
  const failed = rows.filter((r) => r.kind === "failed").length;
  const broken = rows.filter((r) => r.kind === "broken").length;
  $("summary").textContent = `${rows.length} renders of ${data.inputs.length} input` +
    `${data.inputs.length === 1 ? "" : "s"}: ${broken} broken, ${failed} failed. ` +
    "Map: principal components of the standardised measures.";
  const head = el("tr");
  head.append(el("th", "", "measure"), el("th", "num", `PC1 ${fmt(100 * data.explained[0])} %`),
    el("th", "num", `PC2 ${fmt(100 * data.explained[1])} %`));
  $("loadings").append(head);
  for (const [name, a, b] of data.loadings) {
    const tr = el("tr");
    tr.append(el("td", "", name), el("td", "num", fmt(a)), el("td", "num", fmt(b)));
    $("loadings").append(tr);
  }

  // -- playing
  let selected = -1, cursor = -1, hover = -1, playing = "";
  function rings() {
    for (const [mark, i] of [[ring, selected], [cursorRing, cursor]]) {
      const on = i >= 0 && rows[i].v;
      mark.setAttribute("visibility", on ? "visible" : "hidden");
      if (!on) continue;
      mark.setAttribute("cx", rows[i].X.toFixed(1));
      mark.setAttribute("cy", rows[i].Y.toFixed(1));
    }
  }
  function now(text, on) {
    $("now").textContent = text;
    $("now").classList.toggle("playing", !!on);
  }
  function play(path, what) {
    playing = what;
    player.src = encoded(path);
    now(`loading ${what}`);
    const started = player.play();
    if (!started) return;
    started.catch((e) => { if (!player.error) now(`${what}: press play (${e.name})`); });
  }
  function choose(i) {
    selected = i; cursor = i;
    const r = rows[i], input = data.inputs[r.input];
    describe(r, $("details"));
    unbent.disabled = !input.unbent;
    unbent.textContent = input.unbent ? `play the unbent ${input.name}` : "no unbent render";
    if (r.audio) play(r.audio, r.id);
    else {
      player.pause();
      player.removeAttribute("src");
      now(`${r.id}: no audio, the render failed`);
    }
    rings();
  }
  function playUnbent() {
    const i = selected >= 0 ? selected : cursor;
    const input = i >= 0 ? data.inputs[rows[i].input] : null;
    if (input && input.unbent) play(input.unbent, `the unbent ${input.name}`);
  }
  player.addEventListener("playing", () => now(`playing ${playing}`, true));
  player.addEventListener("pause", () => { if (!player.error) now(`paused: ${playing}`); });
  player.addEventListener("ended", () => now(`played: ${playing}`));
  player.addEventListener("error", () => {
    if (player.getAttribute("src")) now(`cannot load ${playing}`);
  });
  unbent.addEventListener("click", playUnbent);

  // -- pointer and keys
  function nearest(evt) {
    const m = svg.getScreenCTM();
    if (!m) return -1;
    const X = (evt.clientX - m.e) / m.a, Y = (evt.clientY - m.f) / m.d, reach = 12 / m.a;
    let best = -1, bd = reach * reach;
    rows.forEach((r, i) => {
      if (!r.v) return;
      const d = (r.X - X) ** 2 + (r.Y - Y) ** 2;
      if (d < bd) { bd = d; best = i; }
    });
    return best;
  }
  svg.addEventListener("mousemove", (evt) => {
    const i = nearest(evt);
    if (i !== hover) { hover = i; showTip(i); }
    svg.style.cursor = i >= 0 ? "pointer" : "default";
  });
  svg.addEventListener("mouseleave", () => { hover = -1; showTip(-1); });
  svg.addEventListener("click", (evt) => {
    const i = nearest(evt);
    if (i >= 0) choose(i);
  });
  function step(dx, dy) {
    const order = rows.map((r, i) => i).filter((i) => rows[i].v);
    if (!order.length) return;
    if (cursor < 0 || !rows[cursor].v) { cursor = order[0]; return; }
    const a = rows[cursor];
    let best = -1, score = Infinity;
    for (const i of order) {
      const ex = rows[i].X - a.X, ey = rows[i].Y - a.Y, along = ex * dx + ey * dy;
      if (along <= 0) continue;
      const s = along + 2 * Math.abs(ex * dy - ey * dx);
      if (s < score) { score = s; best = i; }
    }
    if (best >= 0) cursor = best;
  }
  function next(by) {
    const order = rows.map((r, i) => i).filter((i) => rows[i].v);
    if (!order.length) return;
    const k = order.indexOf(cursor);
    cursor = order[k < 0 ? 0 : (k + by + order.length) % order.length];
  }
  const arrows = {ArrowRight: [1, 0], ArrowLeft: [-1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1]};
  svg.addEventListener("keydown", (evt) => {
    if (arrows[evt.key]) step(...arrows[evt.key]);
    else if (evt.key === "n" || evt.key === "p") next(evt.key === "n" ? 1 : -1);
    else if (evt.key === "Enter" || evt.key === " ") {
      if (cursor >= 0 && rows[cursor].v) choose(cursor);
    }
    else if (evt.key === "u") { playUnbent(); return; }
    else if (evt.key === "Escape") { player.pause(); hover = -1; showTip(-1); return; }
    else return;
    evt.preventDefault();
    hover = cursor;
    showTip(cursor);
    rings();
  });
  svg.addEventListener("blur", () => { if (hover === cursor) { hover = -1; showTip(-1); } });

  recolour();
  apply();
})();
</script>
</body>
</html>
"""
