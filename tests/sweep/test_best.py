"""Ranking a sweep's renders: broken ones never above a clean one, and counted when left out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import torchbend as tb
from torchbend.cli.main import main
from torchbend.sweep.measure import BROKEN

CLEAN = {"nonfinite": False, "silent": False, "clipping": False, "dc": False, "unchanged": False}


def row(key: str, distance: float | None, **flags: bool) -> dict[str, Any]:
    failed = distance is None
    return {
        "id": key,
        "audio": None if failed else f"renders/{key}.wav",
        "measures": {} if failed else {"distance": distance, "peak_dbfs": -1.0},
        "flags": {} if failed else {**CLEAN, **flags},
        "broken": failed or any(flags.get(name, False) for name in BROKEN),
        "error": "RuntimeError: the model broke" if failed else None,
        "config": {"bendings": []},
    }


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A sweep whose furthest renders are broken: clipped (the furthest of all), silent with
    an offset, and one that failed."""
    rows = [
        row("00000-00-a", 1.0),
        row("00001-00-a", 2.0),
        row("00002-00-a", 9.0, clipping=True),
        row("00003-00-a", 5.0, silent=True, dc=True),
        row("00004-00-a", None),
        row("00005-00-a", 0.5, unchanged=True),  # unchanged is not broken
    ]
    stale = row("00006-00-a", 7.0, clipping=True)
    stale["broken"] = False  # a row whose flags say more than its broken field
    rows.append(stale)
    (tmp_path / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [r["id"][:5] for r in rows]


def test_broken_renders_are_left_out_and_counted(folder: Path) -> None:
    ranked = tb.sweep.best(folder, by="distance")
    assert ids(ranked) == ["00001", "00000", "00005"]
    assert ranked.excluded == 4
    assert ranked.left_out == {"clipping": 2, "silent": 1, "dc": 1, "failed": 1}


def test_broken_renders_asked_for_rank_after_every_clean_one(folder: Path) -> None:
    ranked = tb.sweep.best(folder, by="distance", broken=True)
    assert ids(ranked) == ["00001", "00000", "00005", "00002", "00006", "00003"]
    assert (ranked.excluded, ranked.left_out) == (1, {"failed": 1})  # no measure to rank by
    lowest = tb.sweep.best(folder, by="distance", broken=True, lowest=True, top=4)
    assert ids(lowest) == ["00005", "00000", "00001", "00003"]


def test_the_command_says_how_many_it_left_out(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "best", str(folder), "--by", "distance", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["id"][:5] for line in out.splitlines()] == ["00001", "00000", "00005"]
    assert err.strip() == (
        "left out 4 broken or failed render(s) (clipping 2, dc 1, failed 1, silent 1); "
        "--broken ranks them after the clean ones"
    )
    assert main(["sweep", "best", str(folder), "--by", "distance", "--broken", "--top", "4"]) == 0
    out, err = capsys.readouterr()
    assert [line.split()[2][:5] for line in out.splitlines()] == [
        "00001",
        "00000",
        "00005",
        "00002",
    ]
    assert out.splitlines()[3].endswith("[clipping]")
    assert err.strip() == "left out 1 broken or failed render(s) (failed 1)"
