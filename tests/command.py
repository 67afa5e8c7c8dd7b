"""The ``torchbend`` command run in this process: what it prints and returns, as a started
process would give them (a started process pays a second or more to import torch, so the tests
that check every path start one per command and run the rest here)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path

from torchbend.cli import main


def in_process(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``torchbend ARGS`` run by the command's own ``main``; the parser's exits are codes,
    stdout and stderr are pipes (not terminals: no progress bar), as in ``subprocess.run``."""
    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse's usage errors
                code = e.code if isinstance(e.code, int) else 2
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(["torchbend", *args], code, out.getvalue(), err.getvalue())
