"""The atlas of a sweep's folder, by its name and by the deprecated one."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import torchbend as tb


def _folder(tmp_path: Path) -> Path:
    rows = [
        {"id": f"r{i}", "measures": {"rms_dbfs": -20.0 + i, "flatness": i % 2}} for i in range(4)
    ]
    (tmp_path / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_draw_map_maps_the_rows_of_a_folder(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name warns of nothing
        atlas = tb.sweep.draw_map(folder, png=False)
    assert atlas.html == folder / "atlas.html" and atlas.html.is_file()
    assert sorted(atlas.coords) == ["r0", "r1", "r2", "r3"]


def test_map_is_a_deprecated_alias_that_names_draw_map(tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning, match=r"torchbend\.sweep\.draw_map"):
        old = tb.sweep.map
    assert old is tb.sweep.draw_map
    with pytest.warns(DeprecationWarning, match=r"draw_map"):
        from torchbend.sweep import map as imported
    assert imported is tb.sweep.draw_map
    assert "map" not in vars(tb.sweep)  # no binding that shadows the builtin
    with pytest.raises(AttributeError, match=r"no attribute 'mapp'"):
        tb.sweep.mapp
