"""Open pages in the system's Chromium with Playwright, for the tests of torchbend's HTML pages.

Playwright drives the Chromium that the system has (``scripts/system_browser.sh`` installs it
where it can); its own browser download is never used. Tests that need a browser carry
:data:`needs_browser`, which skips them, with the reason, when Playwright or Chromium is missing.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CHROMIUM_FLAGS", "Opened", "chromium_path", "missing", "needs_browser", "open_page"]

CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
)
"""How the tests launch Chromium, headless (see :func:`open_page`)."""

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium_path() -> str | None:
    """The system's Chromium (or Chrome) executable, or ``None``."""
    for name in _NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def missing() -> str | None:
    """Why a browser test cannot run here, or ``None`` when it can."""
    if importlib.util.find_spec("playwright") is None:
        return "needs playwright: pip install -c scripts/constraints.txt playwright"
    if chromium_path() is None:
        return "needs a system Chromium on PATH: bash scripts/system_browser.sh"
    return None


needs_browser = pytest.mark.skipif(missing() is not None, reason=missing() or "")
"""Skip a test, saying why, when Playwright or the system Chromium is missing."""


@dataclass
class Opened:
    """A page open in headless Chromium, with what went wrong on it so far."""

    page: Any
    """Playwright's ``Page``."""
    console_errors: list[str] = field(default_factory=list)
    """Messages the page logged at the ``error`` level."""
    page_errors: list[str] = field(default_factory=list)
    """Uncaught exceptions of the page's scripts."""

    @property
    def errors(self) -> list[str]:
        """Every error: console errors, then page errors."""
        return [*self.console_errors, *self.page_errors]


@contextmanager
def open_page(
    target: str | Path, *, width: int = 1280, height: int = 900, timeout_ms: int = 30_000
) -> Iterator[Opened]:
    """Open a file (by path) or a URL in headless Chromium and wait for it to load.

    ``--no-sandbox`` because tests may run as root, where Chromium's sandbox refuses to start;
    no GPU, no background network, no component updates and no first-run screens, since the
    test machines have neither a GPU nor the internet; autoplay is allowed so that
    ``audio.play()`` starts without a real user gesture.
    """
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    if executable is None:
        pytest.skip(missing() or "no Chromium")
    url = Path(target).resolve().as_uri() if isinstance(target, Path) else target
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            headless=True,
            args=[*CHROMIUM_FLAGS, "--autoplay-policy=no-user-gesture-required"],
        )
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(timeout_ms)
            opened = Opened(page)
            page.on(
                "console",
                lambda m: opened.console_errors.append(m.text) if m.type == "error" else None,
            )
            page.on("pageerror", lambda e: opened.page_errors.append(str(e)))
            page.goto(url, wait_until="load")
            yield opened
        finally:
            browser.close()
