"""Make docs/studio.png, the README's picture of the studio, from a real session.

Starts a studio on the shipped model (``tiny_rave``) with a temporary output folder, opens it
in the system's Chromium with Playwright (as the browser tests do, 1440 x 900), finds
``decoder_1`` with the search box, attaches a ``Mask`` whose ``prob`` is a live control,
renders the ``drums`` sound, waits for the waveforms and spectrograms to be drawn, and writes
the page as a PNG.

Run from the repository root: .venv/bin/python scripts/studio_screenshot.py [--out docs/studio.png]

Needs the studio's dependencies (``pip install 'torchbend[studio]'``), Playwright and a system
Chromium (``bash scripts/system_browser.sh``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.browser, and torchbend without installing it

import argparse  # noqa: E402
import tempfile  # noqa: E402

from tests.browser import missing, open_page  # noqa: E402
from torchbend.models.reference import load_model  # noqa: E402
from torchbend.studio import Studio, StudioServer  # noqa: E402

WIDTH, HEIGHT = 1440, 900


def screenshot(out: Path) -> None:
    """Write the picture of a studio session to ``out``."""
    with tempfile.TemporaryDirectory() as output:
        studio = Studio(load_model("tiny_rave"), "tiny_rave", output=output)
        server = StudioServer(studio, port=0).start()
        try:
            with open_page(server.url, width=WIDTH, height=HEIGHT, timeout_ms=60_000) as opened:
                p = opened.page
                p.wait_for_selector("body[data-ready='1']")
                p.fill("#search", "decoder_1")
                p.press("#search", "Enter")
                p.select_option("#callback", "Mask")
                p.check("#knob-prob")
                p.click("#attach")
                p.wait_for_selector("#bendings li")
                p.select_option("#sound", "drums")
                p.click("#render")
                p.wait_for_selector("#render-info[data-differs='1']")
                for kind in ("input", "unbent", "bended"):
                    p.wait_for_selector(f"canvas.spectrogram[data-kind='{kind}'][data-drawn]")
                p.wait_for_timeout(500)  # the last redraw after the layout settles
                out.parent.mkdir(parents=True, exist_ok=True)
                p.screenshot(path=str(out))
                if opened.errors:
                    raise SystemExit(f"the page logged errors: {opened.errors}")
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "studio.png"), help="the PNG")
    args = parser.parse_args()
    problem = missing()
    if problem is not None:
        raise SystemExit(f"studio_screenshot: {problem}")
    out = Path(args.out)
    screenshot(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
