"""Make docs/studio.png, the README's picture of the studio, from a real session, and the
pictures of the graph view at "fit" (docs/studio-graph-<model>.png).

Starts a studio on the shipped model (``tiny_rave``) with a temporary output folder, opens it
in the system's Chromium with Playwright (as the browser tests do, 1440 x 900), finds
``decoder_1`` with the search box, attaches a ``Mask`` whose ``prob`` is a live control,
renders the ``drums`` sound, waits for the waveforms and spectrograms to be drawn, and writes
the page as a PNG.

The graph pictures draw the graph view alone (graph.js and its vendored layout library on a
page of their own, 1440 x 900) after ``fit()``: for the shipped model and for the zoo's largest
model (diffusers' ``UNet1DModel``, 807 nodes; needs ``diffusers``), and the latter again with
its ``mid_block`` expanded.

Run from the repository root: .venv/bin/python scripts/studio_screenshot.py [--out docs/studio.png]
[--graphs-only]

Needs the studio's dependencies (``pip install 'torchbend[studio]'``), Playwright and a system
Chromium (``bash scripts/system_browser.sh``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.browser, and torchbend without installing it

import argparse  # noqa: E402
import functools  # noqa: E402
import http.server  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
from typing import Any  # noqa: E402

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


def graph_screenshots(docs: Path) -> None:
    """Write docs/studio-graph-<model>.png: the graph view at "fit" on two models."""
    import torch

    import torchbend as tb
    from tests.studio.test_graph_view import GRAPH_JS, HARNESS, VENDOR, _Quiet, largest_zoo_graph
    from torchbend.audio.render import trace_audio
    from torchbend.studio.describe import graph_json

    shipped = tb.BendedModule(load_model("tiny_rave"))
    trace_audio(shipped, "forward", torch.zeros(1, 1, 8192))
    graphs: dict[str, Any] = {"tiny_rave": graph_json(shipped, "forward")}
    graphs["UNet1DModel"] = largest_zoo_graph()
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(GRAPH_JS, Path(folder) / "graph.js")
        shutil.copytree(VENDOR, Path(folder) / "vendor")
        page = HARNESS.replace(
            "#g{width:1000px;height:700px}", f"#g{{width:{WIDTH}px;height:{HEIGHT}px}}"
        )
        (Path(folder) / "index.html").write_text(page, encoding="utf-8")
        handler = functools.partial(_Quiet, directory=folder)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
            with open_page(url, width=WIDTH, height=HEIGHT, timeout_ms=120_000) as opened:
                p = opened.page
                p.wait_for_function("window.ready === true")
                for name, graph in graphs.items():
                    p.evaluate("(g) => { window.view.setGraph(g); window.view.fit(); }", graph)
                    p.wait_for_timeout(300)
                    out = docs / f"studio-graph-{name}.png"
                    p.screenshot(path=str(out))
                    print(f"wrote {out}")
                # one box opened: its sub-blocks stay collapsed, the frames nest
                p.evaluate("() => window.view.expand('mid_block')")
                p.wait_for_timeout(300)
                out = docs / "studio-graph-UNet1DModel-mid_block.png"
                p.screenshot(path=str(out))
                print(f"wrote {out}")
                if opened.errors:
                    raise SystemExit(f"the page logged errors: {opened.errors}")
        finally:
            server.shutdown()
            server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "studio.png"), help="the PNG")
    parser.add_argument("--graphs-only", action="store_true", help="only the graph pictures")
    args = parser.parse_args()
    problem = missing()
    if problem is not None:
        raise SystemExit(f"studio_screenshot: {problem}")
    if not args.graphs_only:
        out = Path(args.out)
        screenshot(out)
        print(f"wrote {out}")
    graph_screenshots(ROOT / "docs")


if __name__ == "__main__":
    main()
