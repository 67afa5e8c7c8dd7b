"""Every Python and bash block of the docs runs as written: each page's blocks in order, in a
fresh folder, as a reader pasting them into one Python session and one shell would.

The folder holds what a clone holds (a copy of its tracked files) and nothing an earlier page or
test wrote. Python blocks run in the project's interpreter, bash blocks in ``bash -e`` with the
interpreter's ``bin`` folder first on ``PATH`` (so ``torchbend`` is the command installed with
the project, and ``python`` the same interpreter); both import the checkout under test.

A block that cannot run in a test is marked in the page, on the line before it, with
``<!-- not run: the reason -->``; :data:`NOT_RUN` lists them, so that a new one is a decision.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "assets" / "README.md"]

RUN = ("python", "bash")
"""The languages of the blocks that run; the others (:data:`DATA`) are data or output."""
DATA = ("json", "")

NOT_RUN_MARK = re.compile(r"<!-- not run: (?P<reason>.+?) -->\s*\Z", re.S)

NOT_RUN = {
    ("README.md", "bash scripts/demo.sh"): "sets up .venv and the system",
    ("README.md", "torchbend live tiny_ddsp"): "a sound card",
    ("README.md", "torchbend studio"): "a server",
    ("docs/studio.md", "torchbend studio"): "a server",
    ("docs/realtime.md", "from torchbend.audio.live import live"): "a sound card",
    ("docs/realtime.md", "apt-get install -y libportaudio2"): "system set-up",
    ("docs/realtime.md", "python benchmarks/bench_realtime.py"): "minutes",
    ("docs/realtime.md", "import torch\nimport torchbend as tb\n\nrave = "): "RAVE export",
    ("docs/realtime.md", "torchbend check my_rave.ts"): "RAVE export",
    ("docs/model.md", "python scripts/make_assets.py"): "rewrites the shipped files",
    ("assets/README.md", "python scripts/make_assets.py"): "rewrites the shipped files",
}
"""The blocks marked not run, by page and the start of their code, and a word of the reason
each gives in full (the tests check both)."""


@dataclass(frozen=True)
class Block:
    """A fenced code block of a Markdown page."""

    page: str
    """The page, relative to the repository."""
    line: int
    """The line of its opening fence."""
    language: str
    code: str
    not_run: str | None
    """The reason given by a ``<!-- not run: ... -->`` mark before it, if any."""


def blocks(page: Path) -> list[Block]:
    """The ```python and ```bash blocks of ``page``, in order."""
    text = page.read_text()
    name = page.relative_to(ROOT).as_posix()
    found = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```[ \t]*$", text, re.S | re.M):
        if m.group(1) not in RUN:
            continue
        before = text[: m.start()].rsplit("\n\n", 1)[-1]  # the paragraph before the fence
        mark = NOT_RUN_MARK.search(before)
        line = text.count("\n", 0, m.start()) + 1
        found.append(
            Block(name, line, m.group(1), m.group(2), mark.group("reason") if mark else None)
        )
    return found


DRIVER = r"""
import json, subprocess, sys, time, traceback

blocks, session = json.load(open(sys.argv[1]))
namespace = {"__name__": "__main__"}
start = time.monotonic()
for block in blocks:
    where = f"{block['page']}:{block['line']} ({block['language']})"
    print(f"---- {where}, at {time.monotonic() - start:.0f} s", flush=True)
    if block["language"] == "bash":
        code = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block["code"]]).returncode
        if code:
            sys.exit(f"FAILED: the block at {where} exited with {code}")
        continue
    if not session:
        namespace = {"__name__": "__main__"}
    # Blank lines first: tracebacks name the page's own line numbers.
    source = "\n" * block["line"] + block["code"]
    try:
        exec(compile(source, block["page"], "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        sys.exit(f"FAILED: the block at {where} raised")
"""
"""Runs the blocks given in a JSON file, in order, in the current folder, and stops at the
first that fails, naming it. ``session``: Python blocks share one namespace (each page of the
docs builds on its earlier blocks) or each runs in its own (the README's stand alone)."""


def fresh_folder(folder: Path) -> Path:
    """``folder`` made a fresh clone of the repository: a copy of its tracked files as they are
    in the working tree (a copy, so that no block writes into the repository)."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for path in filter(None, tracked.split("\0")):
        if (ROOT / path).is_file():  # not a file deleted and not yet committed
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / path, folder / path)
    return folder


def run_blocks(page: Path, folder: Path, *, session: bool, timeout: float = 600) -> None:
    """Run the blocks of ``page`` not marked not run, in order, in a fresh clone made in
    ``folder``; fail with the output and the first block that failed."""
    run = [vars(b) for b in blocks(page) if b.not_run is None]
    script = folder / "blocks.json"
    fresh_folder(folder / "clone")
    script.write_text(json.dumps([run, session]))
    bin_folder = Path(sys.executable).parent
    assert (bin_folder / "torchbend").is_file(), f"no torchbend command next to {sys.executable}"
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PATH"] = f"{bin_folder}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(script)],
        cwd=folder / "clone",
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode:
        pytest.fail(f"{done.stdout[-6000:]}\n{done.stderr[-6000:]}", pytrace=False)


def marked_not_run(pages: list[Path]) -> dict[tuple[str, str], str]:
    """The blocks of ``pages`` marked not run, keyed as :data:`NOT_RUN`, with their reasons."""
    marked = {}
    for page in pages:
        for b in blocks(page):
            if b.not_run is not None:
                key = next((k for k in NOT_RUN if k[0] == b.page and b.code.startswith(k[1])), None)
                marked[key or (b.page, b.code.splitlines()[0])] = b.not_run
    return marked


def check_not_run(pages: list[Path]) -> None:
    marked = marked_not_run(pages)
    names = {p.relative_to(ROOT).as_posix() for p in pages}
    expected = {k: v for k, v in NOT_RUN.items() if k[0] in names}
    assert set(marked) == set(expected), "blocks marked not run differ from NOT_RUN"
    for key, reason in marked.items():
        assert expected[key] in reason, f"{key}: the reason given is {reason!r}"


RUNNABLE = [page for page in DOCS if any(b.not_run is None for b in blocks(page))]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_blocks_of_each_page_run_in_order_in_a_fresh_folder(page, tmp_path):
    run_blocks(page, tmp_path, session=True)


def test_the_blocks_not_run_are_marked_and_listed():
    check_not_run(DOCS)


def training_defaults() -> dict[str, float]:
    """The defaults of scripts/train_model.py's options, read from its source."""
    import ast

    tree = ast.parse((ROOT / "scripts" / "train_model.py").read_text())
    return {
        call.args[0].value: keyword.value.value  # type: ignore[attr-defined]
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and getattr(call.func, "attr", None) == "add_argument"
        and isinstance(call.args[0], ast.Constant)
        for keyword in call.keywords
        if keyword.arg == "default" and isinstance(keyword.value, ast.Constant)
    }


def test_every_page_gives_the_training_time_of_the_script_and_the_shipped_weights():
    # One source: the training script's time limit and threads, and the steps the shipped
    # weights' metadata records; every page that says how long training takes says that.
    from safetensors import safe_open

    defaults = training_defaults()
    minutes = defaults["--time-limit"] / 60
    assert defaults["--threads"] == 2, "the pages say two CPU threads"
    with safe_open(str(ROOT / "assets" / "tiny_rave.safetensors"), framework="pt") as f:
        steps = int(f.metadata()["steps"])
    for name, says_steps in (
        ("README.md", True),
        ("docs/model.md", True),
        ("assets/README.md", False),
    ):
        text = " ".join((ROOT / name).read_text().split())
        said = [int(m) for m in re.findall(r"train\w*[^.]*?\b(\d+) min", text)]
        assert said and set(said) == {minutes}, f"{name} says training takes {said} minutes"
        assert re.search(r"\b(two|2) CPU threads", text), f"{name}: on how many threads?"
        assert not says_steps or f"{steps:,} steps" in text, f"{name}: {steps:,} steps"


def test_every_block_runs_or_is_data():
    # A block in another language (```sh, ```console) would be left out without a word.
    for page in [ROOT / "README.md", *DOCS]:
        languages = re.findall(r"^```(\w*)\n.*?^```[ \t]*$", page.read_text(), re.S | re.M)
        assert set(languages) <= {*RUN, *DATA}, f"{page.name}: {set(languages)}"
