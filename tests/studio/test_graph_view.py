"""Tests of the studio's graph view (torchbend/studio/static/graph.js), in a real Chromium.

A small harness page loads graph.js as an ES module (served over HTTP from a temporary folder:
Chromium refuses modules from file:// pages) and feeds it graph JSON in the format of
``GET /api/graph``: the real tiny RAVE's graph, a synthetic graph of 2000 nodes, and odd input.
"""

from __future__ import annotations

import functools
import http.server
import random
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import needs_browser, open_page
from torchbend.studio.describe import graph_json

GRAPH_JS = Path(__file__).resolve().parents[2] / "torchbend" / "studio" / "static" / "graph.js"
VENDOR = GRAPH_JS.parents[1] / "vendor"

HARNESS = """<!doctype html>
<html><head><meta charset="utf-8"><title>graph view</title><link rel="icon" href="data:,">
<style>body{margin:0;background:#0e1014}#g{width:1000px;height:700px}</style></head>
<body><div id="g"></div>
<script type="module">
import { GraphView } from "./graph.js";
window.calls = { select: [], hover: [] };
window.view = new GraphView(document.getElementById("g"), {
  onSelect: (name) => window.calls.select.push(name),
  onHover: (name) => window.calls.hover.push(name),
});
window.ready = true;
</script></body></html>
"""

TIMES = "\N{MULTIPLICATION SIGN}"
"""How a node's third line writes a shape: 1x64x512 with multiplication signs."""

HOSTILE = '<img src=x onerror="window.pwned=1">&amp;'
"""A node name that would become an element if the view wrote names as markup."""


# -- graph JSON (as the server sends it: torchbend.studio.describe.graph_json) ---------------


def synthetic(count: int = 2000, seed: int = 0) -> dict[str, Any]:
    """A graph of ``count`` nodes: a chain of residual blocks, with branches, in module groups."""
    rng = random.Random(seed)
    nodes: list[dict[str, Any]] = []

    def add(name: str, op: str, target: str, module: str, inputs: list[str]) -> str:
        channels = rng.choice([16, 32, 64])
        nodes.append(
            {
                "name": name,
                "op": op,
                "target": target,
                "module": module,
                "shape": [1, channels, 512],
                "dtype": "float32",
                "tensor": True,
                "bent": False,
                "inputs": inputs,
            }
        )
        return name

    last = add("x", "placeholder", "x", "", [])
    block = 0
    while len(nodes) < count - 1:
        group = f"net.blocks.{block}"
        start = last
        for k in range(rng.randint(4, 10)):
            if len(nodes) >= count - 3:
                break
            sub = f"{group}.layers.{k}"
            last = add(f"blocks_{block}_conv_{k}", "call_module", sub, sub, [last])
            if len(nodes) < count - 3:
                last = add(f"blocks_{block}_act_{k}", "call_function", "torch.tanh", group, [last])
        if len(nodes) < count - 2 and rng.random() < 0.5:
            side = add(f"blocks_{block}_skip", "call_module", f"{group}.skip", group, [start])
            last = add(f"blocks_{block}_add", "call_function", "operator.add", group, [last, side])
        block += 1
    add("output", "output", "output", "", [last])
    return {"fn": "forward", "nodes": nodes[:count], "flow_steps": [], "guards": []}


@pytest.fixture(scope="module")
def rave_graph() -> dict[str, Any]:
    """The real graph of the tiny RAVE, traced on one block of silence."""
    torch = pytest.importorskip("torch")
    import torchbend as tb
    from torchbend.audio.render import trace_audio
    from torchbend.models.reference import load_model

    bended = tb.BendedModule(load_model("tiny_rave"))
    trace_audio(bended, "forward", torch.zeros(1, 1, 8192))
    return graph_json(bended, "forward")


def transformer_graph() -> dict[str, Any]:
    """A small U-Net around transformer blocks (nested modules, residuals, long skips)."""
    torch = pytest.importorskip("torch")
    from torch import nn

    import torchbend as tb

    class Attention(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

        def forward(self, x: Any) -> Any:
            a = torch.softmax(self.q(x) @ self.k(x).transpose(-1, -2) / 4.0, -1)
            return self.o(a @ self.v(x))

    class Block(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.attn = Attention(d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.norm(x))
            return x + self.mlp(x)

    class UNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down = nn.ModuleList([nn.Conv1d(c, 8, 3, padding=1) for c in (4, 8)])
            self.blocks = nn.ModuleList([Block(8) for _ in range(2)])
            self.up = nn.ModuleList([nn.Conv1d(16, 8, 3, padding=1) for _ in range(2)])

        def forward(self, x: Any, cond: Any) -> Any:
            skips = []
            for layer in self.down:
                x = torch.relu(layer(x))
                skips.append(x)
            h = x.transpose(1, 2) + cond
            for block in self.blocks:
                h = block(h)
            x = h.transpose(1, 2)
            for layer in self.up:
                x = torch.relu(layer(torch.cat([x, skips.pop()], 1)))
            return x, x.mean()

    bended = tb.BendedModule(UNet())
    bended.trace("forward", x=torch.zeros(1, 4, 16), cond=torch.zeros(1, 16, 8))
    return graph_json(bended, "forward")


# -- the page --------------------------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of the harness page, served from a temporary folder on 127.0.0.1."""
    folder = tmp_path_factory.mktemp("graph_view")
    shutil.copy(GRAPH_JS, folder / "graph.js")
    shutil.copytree(VENDOR, folder / "vendor")  # graph.js imports ../vendor/dagre-<version>/
    (folder / "index.html").write_text(HARNESS, encoding="utf-8")
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def load(opened: Any, graph: Any) -> None:
    page = opened.page
    page.wait_for_function("window.ready === true")
    page.evaluate("(g) => window.view.setGraph(g)", graph)


def count(page: Any, selector: str) -> int:
    return page.locator(selector).count()


def node(page: Any, name: str) -> Any:
    return page.locator(f'g.tb-graph-node[data-name="{name}"]')


def overlaps(page: Any) -> list[str]:
    """Nodes drawn inside the frame of a group they do not belong to, or over other nodes."""
    return page.evaluate(
        """() => {
          const box = (e) => e.getBoundingClientRect();
          const hit = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 &&
                                a.top < b.bottom - 1 && b.top < a.bottom - 1;
          const nodes = [...document.querySelectorAll('g.tb-graph-node, g.tb-graph-collapsed')]
            .map((e) => ({e, r: box(e.querySelector('.tb-graph-node-box, .tb-graph-collapsed-box')),
                          m: e.getAttribute('data-module') || e.getAttribute('data-group') || ''}));
          const bad = [];
          for (const g of document.querySelectorAll('g.tb-graph-group')) {
            const path = g.getAttribute('data-group');
            const r = box(g.querySelector('.tb-graph-group-box'));
            for (const n of nodes) {
              const inside = n.m === path || n.m.startsWith(path + '.');
              if (!inside && hit(r, n.r)) bad.push(`${n.e.dataset.name || n.m} in ${path}`);
            }
          }
          const sorted = nodes.slice().sort((a, b) => a.r.top - b.r.top);
          for (let i = 0; i < sorted.length; i++) {
            for (let j = i + 1; j < sorted.length && sorted[j].r.top < sorted[i].r.bottom; j++) {
              if (hit(sorted[i].r, sorted[j].r)) bad.push(`${i} over ${j}`);
            }
          }
          return bad;
        }"""
    )


# -- tests -----------------------------------------------------------------------------------


def test_no_address_in_the_file():
    text = GRAPH_JS.read_text(encoding="utf-8")
    assert "http://" not in text
    assert "https://" not in text
    assert "innerHTML" not in text.replace('probe.innerHTML = "<svg></svg>"', "")


@needs_browser
def test_draws_the_real_graph(site, rave_graph):
    names = [n["name"] for n in rave_graph["nodes"]]
    edges = sum(len(n["inputs"]) for n in rave_graph["nodes"])
    with open_page(site) as opened:
        load(opened, rave_graph)
        page = opened.page
        assert count(page, "g.tb-graph-node") == len(names)
        drawn = page.eval_on_selector_all(
            "g.tb-graph-node", "(els) => els.map((e) => e.dataset.name)"
        )
        assert sorted(drawn) == sorted(names)
        assert count(page, "path.tb-graph-edge") == edges
        assert count(page, "marker") >= 1
        groups = page.eval_on_selector_all(
            "g.tb-graph-group", "(els) => els.map((e) => e.dataset.group)"
        )
        assert "encoder" in groups and "decoder" in groups
        assert count(page, "g.tb-graph-node.tb-graph-input") == 1
        assert count(page, "g.tb-graph-node.tb-graph-output") == 1
        shape = node(page, "encoder_0").locator("text.tb-graph-node-shape").text_content()
        assert shape == f"1{TIMES}64{TIMES}512"
        assert page.locator(".tb-graph-empty").is_hidden()
        # top to bottom: each node below the nodes it reads
        tops = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('g.tb-graph-node')]
                 .map((e) => [e.dataset.name, e.getBoundingClientRect().top]))"""
        )
        for n in rave_graph["nodes"]:
            for i in n["inputs"]:
                assert tops[i] < tops[n["name"]], (i, n["name"])
        assert overlaps(page) == []
        assert page.get_attribute(".tb-graph", "tabindex") == "0"
        assert opened.errors == []


@needs_browser
def test_search_highlights_and_returns_matches(site, rave_graph):
    with open_page(site) as opened:
        load(opened, rave_graph)
        page = opened.page
        before = page.evaluate("() => window.view.getView()")
        hits = page.evaluate("() => window.view.search('ENCODER_')")
        assert hits == ["encoder_0", "encoder_1", "encoder_2"]
        matched = page.eval_on_selector_all(
            "g.tb-graph-match", "(els) => els.map((e) => e.dataset.name)"
        )
        assert sorted(matched) == hits
        assert count(page, "g.tb-graph-match-current") == 1
        assert node(page, "encoder_0").get_attribute("class").count("tb-graph-match-current") == 1
        assert page.evaluate("() => window.view.getView()") != before  # centred on the first
        assert page.evaluate(r"() => window.view.search('/^decoder_[02]$/')") == [
            "decoder_0",
            "decoder_2",
        ]
        assert count(page, "g.tb-graph-match") == 2
        assert page.evaluate("() => window.view.search('/[/')") == []
        assert page.evaluate("() => window.view.search('nothing like this')") == []
        assert page.evaluate("() => window.view.search('')") == []
        assert count(page, "g.tb-graph-match") == 0
        assert "tb-graph-searching" not in page.get_attribute(".tb-graph", "class")
        assert page.evaluate("() => window.calls.select") == []  # search selects nothing
        assert opened.errors == []


@needs_browser
def test_select_and_click_call_on_select(site, rave_graph):
    with open_page(site) as opened:
        load(opened, rave_graph)
        page = opened.page
        assert page.evaluate("() => window.view.selected()") is None
        node(page, "encoder_1").click()
        assert page.evaluate("() => window.calls.select") == ["encoder_1"]
        assert page.evaluate("() => window.view.selected()") == "encoder_1"
        assert "tb-graph-selected" in node(page, "encoder_1").get_attribute("class")
        assert count(page, "path.tb-graph-edge-active") == 2
        assert page.evaluate("() => window.view.select('decoder_2')") is True
        assert page.evaluate("() => window.calls.select") == ["encoder_1", "decoder_2"]
        assert count(page, "g.tb-graph-selected") == 1
        assert "tb-graph-selected" in node(page, "decoder_2").get_attribute("class")
        # centred in the view
        box = node(page, "decoder_2").bounding_box()
        assert abs(box["x"] + box["width"] / 2 - 500) < 2
        assert abs(box["y"] + box["height"] / 2 - 350) < 2
        assert page.evaluate("() => window.view.select('no_such_node')") is False
        assert page.evaluate("() => window.view.selected()") == "decoder_2"
        assert opened.errors == []


@needs_browser
def test_collapse_and_expand_groups(site, rave_graph):
    total = len(rave_graph["nodes"])
    with open_page(site) as opened:
        load(opened, rave_graph)
        page = opened.page
        edges = count(page, "path.tb-graph-edge")
        page.locator('.tb-graph-group-label[data-group="encoder"]').click()
        assert page.evaluate("() => window.view.collapsed()") == ["encoder"]
        assert count(page, "g.tb-graph-node") == total - 3
        assert count(page, 'g.tb-graph-node[data-module^="encoder"]') == 0
        assert count(page, 'g.tb-graph-collapsed[data-group="encoder"]') == 1
        assert count(page, 'g.tb-graph-group[data-group="encoder"]') == 0
        # the edges into and out of the group now end at its box
        assert count(page, 'path.tb-graph-edge[data-to-group="encoder"]') == 1
        assert count(page, 'path.tb-graph-edge[data-from-group="encoder"]') == 1
        assert page.get_attribute('path[data-to-group="encoder"]', "data-from") == "pqmf_split"
        assert page.get_attribute('path[data-from-group="encoder"]', "data-to") == "decoder_0"
        assert count(page, "path.tb-graph-edge") == edges - 2
        box = page.locator('g.tb-graph-collapsed[data-group="encoder"]')
        assert f"1{TIMES}16{TIMES}512" in box.text_content()
        assert overlaps(page) == []
        # the API too, and a click on the box expands it
        assert page.evaluate("() => window.view.collapse('decoder')") is True
        assert page.evaluate("() => window.view.collapse('decoder')") is False
        assert page.evaluate("() => window.view.collapse('nope')") is False
        assert count(page, "g.tb-graph-node") == total - 6
        assert count(page, 'path[data-from-group="encoder"][data-to-group="decoder"]') == 1
        box.click()
        assert page.evaluate("() => window.view.collapsed()") == ["decoder"]
        assert count(page, "g.tb-graph-node") == total - 3
        # selecting a hidden node opens its group
        assert page.evaluate("() => window.view.select('decoder_1')") is True
        assert page.evaluate("() => window.view.collapsed()") == []
        assert count(page, "g.tb-graph-node") == total
        assert count(page, "path.tb-graph-edge") == edges
        assert page.evaluate("() => window.view.expand('decoder')") is False
        assert opened.errors == []


@needs_browser
def test_hover_shows_the_tooltip(site, rave_graph):
    with open_page(site) as opened:
        load(opened, rave_graph)
        page = opened.page
        tip = page.locator(".tb-graph-tooltip")
        assert tip.is_hidden()
        title = node(page, "encoder_0").locator("title").text_content()
        assert "encoder_0" in title and "[1, 64, 512]" in title and "float32" in title
        node(page, "encoder_0").hover()
        assert tip.is_visible()
        text = tip.text_content()
        for part in ("encoder_0", "call_module", "encoder.0", "[1, 64, 512]", "float32"):
            assert part in text
        assert page.evaluate("() => window.calls.hover") == ["encoder_0"]
        page.mouse.move(2, 2)
        assert tip.is_hidden()
        assert page.evaluate("() => window.calls.hover") == ["encoder_0", None]
        assert opened.errors == []


@needs_browser
def test_wheel_zooms_around_the_pointer_and_drag_pans(site, rave_graph):
    with open_page(site) as opened:
        load(opened, rave_graph)
        page = opened.page
        viewport = page.locator("g.tb-graph-viewport")
        before = viewport.get_attribute("transform")
        view = page.evaluate("() => window.view.getView()")
        page.mouse.move(400, 300)
        page.mouse.wheel(0, -400)
        page.wait_for_function(
            "(s) => window.view.getView().scale > s", arg=view["scale"], timeout=5000
        )
        after = page.evaluate("() => window.view.getView()")
        assert viewport.get_attribute("transform") != before
        # the point under the pointer stays put
        world = [(c - o) / view["scale"] for c, o in ((400, view["x"]), (300, view["y"]))]
        assert abs(world[0] * after["scale"] + after["x"] - 400) < 0.5
        assert abs(world[1] * after["scale"] + after["y"] - 300) < 0.5
        page.evaluate("() => window.view.zoomOut()")
        assert page.evaluate("() => window.view.getView().scale") < after["scale"]
        page.evaluate("() => window.view.zoomIn()")
        assert abs(page.evaluate("() => window.view.getView().scale") - after["scale"]) < 1e-3
        # drag the background
        start = page.evaluate("() => window.view.getView()")
        page.mouse.move(990, 690)
        page.mouse.down()
        page.mouse.move(940, 640, steps=4)
        page.mouse.up()
        moved = page.evaluate("() => window.view.getView()")
        assert abs(moved["x"] - start["x"] + 50) < 0.5
        assert abs(moved["y"] - start["y"] + 50) < 0.5
        assert page.evaluate("() => window.calls.select") == []
        assert opened.errors == []


@needs_browser
def test_keyboard_moves_the_selection(site, rave_graph):
    with open_page(site) as opened:
        load(opened, rave_graph)
        page = opened.page
        page.focus(".tb-graph")
        assert page.evaluate("() => document.activeElement.classList.contains('tb-graph')")
        page.keyboard.press("ArrowDown")  # nothing selected: the first input
        assert page.evaluate("() => window.view.selected()") == "x"
        page.keyboard.press("ArrowDown")
        first = page.evaluate("() => window.view.selected()")
        assert first in ("getattr_3", "reshape")
        page.keyboard.press("ArrowUp")
        assert page.evaluate("() => window.view.selected()") == "x"
        assert page.evaluate("() => window.calls.select") == []  # moving does not choose
        page.evaluate("() => window.view.select('encoder_1')")
        page.keyboard.press("ArrowDown")
        assert page.evaluate("() => window.view.selected()") == "encoder_2"
        page.keyboard.press("ArrowUp")
        page.keyboard.press("ArrowUp")
        assert page.evaluate("() => window.view.selected()") == "encoder_0"
        assert "tb-graph-selected" in node(page, "encoder_0").get_attribute("class")
        assert page.locator(".tb-graph-tooltip").is_visible()  # what the cursor is on
        page.keyboard.press("Enter")
        assert page.evaluate("() => window.calls.select") == ["encoder_1", "encoder_0"]
        # left and right stay in the row
        page.evaluate("() => window.view.select('getitem_3')")
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        row = page.evaluate("() => window.view.selected()")
        assert row in ("getitem_3", "transpose_1")
        # + and - zoom, 0 fits
        scale = page.evaluate("() => window.view.getView().scale")
        page.keyboard.press("+")
        assert page.evaluate("() => window.view.getView().scale") > scale
        page.keyboard.press("-")
        page.keyboard.press("-")
        assert page.evaluate("() => window.view.getView().scale") < scale
        page.keyboard.press("0")
        boxes = page.eval_on_selector_all(
            "g.tb-graph-node",
            "(els) => els.map((e) => e.getBoundingClientRect())"
            ".map((r) => [r.left, r.top, r.right, r.bottom])",
        )
        assert min(b[0] for b in boxes) >= 0 and max(b[2] for b in boxes) <= 1000
        assert min(b[1] for b in boxes) >= 0 and max(b[3] for b in boxes) <= 700
        # C collapses the module of the node under the cursor, Enter opens it again
        page.evaluate("() => window.view.select('decoder_1')")
        page.keyboard.press("c")
        assert page.evaluate("() => window.view.collapsed()") == ["decoder"]
        page.keyboard.press("Enter")
        assert page.evaluate("() => window.view.collapsed()") == []
        assert page.evaluate("() => window.view.selected()") == "decoder_0"
        assert opened.errors == []


@needs_browser
def test_set_bent_marks_nodes(site, rave_graph):
    graph = {**rave_graph, "nodes": [dict(n) for n in rave_graph["nodes"]]}
    for n in graph["nodes"]:
        n["bent"] = n["name"] == "decoder_0"
    with open_page(site) as opened:
        load(opened, graph)
        page = opened.page
        assert page.eval_on_selector_all(
            "g.tb-graph-bent", "(els) => els.map((e) => e.dataset.name)"
        ) == ["decoder_0"]
        page.evaluate("() => window.view.setBent(['encoder_1', 'encoder_2', 'not_a_node'])")
        bent = page.eval_on_selector_all(
            "g.tb-graph-bent", "(els) => els.map((e) => e.dataset.name)"
        )
        assert sorted(bent) == ["encoder_1", "encoder_2"]
        assert count(page, "g.tb-graph-bent .tb-graph-badge") == 2
        assert page.evaluate("() => window.view.bent()") == ["encoder_1", "encoder_2"]
        # a collapsed group shows how many of its nodes are bent
        page.evaluate("() => window.view.collapse('encoder')")
        box = page.locator('g.tb-graph-collapsed[data-group="encoder"]')
        assert "tb-graph-bent" in box.get_attribute("class")
        assert "bent 2" in box.locator(".tb-graph-badge").text_content()
        page.evaluate("() => window.view.expand('encoder')")
        assert count(page, "g.tb-graph-bent") == 2  # kept through the new layout
        page.evaluate("() => window.view.setBent([])")
        assert count(page, "g.tb-graph-bent") == 0
        assert count(page, ".tb-graph-badge") == 0
        assert opened.errors == []


@needs_browser
def test_two_thousand_nodes(site):
    graph = synthetic(2000)
    assert len(graph["nodes"]) == 2000
    with open_page(site) as opened:
        page = opened.page
        page.wait_for_function("window.ready === true")
        page.evaluate("(g) => window.view.setGraph(g)", graph)
        assert count(page, "g.tb-graph-node") == 2000
        edges = sum(len(n["inputs"]) for n in graph["nodes"])
        assert count(page, "path.tb-graph-edge") == edges
        assert count(page, 'g.tb-graph-group[data-group="net.blocks.3"]') == 1
        assert count(page, 'g.tb-graph-group[data-group="net"]') == 1
        hits = page.evaluate("() => window.view.search('blocks_7_conv')")
        assert hits and all(h.startswith("blocks_7_conv_") for h in hits)
        # collapsing the whole network leaves the input, its box and the output
        assert page.evaluate("() => window.view.collapse('net')") is True
        assert count(page, "g.tb-graph-node") == 2
        assert count(page, "g.tb-graph-collapsed") == 1
        assert count(page, "path.tb-graph-edge") == 2
        page.evaluate("() => window.view.expand('net')")
        page.evaluate("() => window.view.collapse('net.blocks.5')")
        assert count(page, 'g.tb-graph-collapsed[data-group="net.blocks.5"]') == 1
        page.evaluate("() => window.view.fit()")
        page.evaluate("() => window.view.select('blocks_40_act_1')")
        assert page.evaluate("() => window.calls.select") == ["blocks_40_act_1"]
        assert opened.errors == []


@needs_browser
def test_layout_keeps_groups_apart(site):
    graph = synthetic(300, seed=3)
    # a side branch outside the groups, read at the end
    names = [n["name"] for n in graph["nodes"]]
    graph["nodes"].insert(
        1,
        {
            "name": "side",
            "op": "call_function",
            "target": "torch.abs",
            "module": "",
            "shape": [1, 1, 8192],
            "dtype": "float32",
            "tensor": True,
            "bent": False,
            "inputs": ["x"],
        },
    )
    graph["nodes"][-1]["inputs"].append("side")
    assert "side" not in names
    with open_page(site, width=1400, height=1000) as opened:
        load(opened, graph)
        page = opened.page
        page.evaluate("() => window.view.fit()")
        assert overlaps(page) == []
        assert opened.errors == []


@needs_browser
def test_odd_input_never_throws(site):
    odd = {
        "nodes": [
            {"name": "a", "op": "placeholder", "target": "a", "shape": None, "inputs": []},
            {"name": "b", "op": "call_function", "inputs": ["a", "ghost", 3, None]},
            {"name": "c", "op": "call_module", "target": "m.c", "module": "m.c", "inputs": "a"},
            {"name": "c", "op": "call_method", "target": "view", "module": "m", "inputs": ["c"]},
            {"name": HOSTILE, "op": None, "target": {"x": 1}, "module": 7, "inputs": ["b"]},
            {
                "name": "t",
                "op": "call_function",
                "target": "<built-in function getitem>",
                "module": "m..n",
                "shape": [[1, 2], [3, [4, 5]], None],
                "dtype": ["float32", ["int64"]],
                "inputs": ["c", HOSTILE, "t"],
            },
            {"name": "late", "op": "call_function", "inputs": ["cyc"]},
            {"name": "cyc", "op": "call_function", "inputs": ["late"]},
            None,
            "junk",
            {"name": 12, "shape": "weird", "inputs": ["a"]},
            {"name": "output", "op": "output", "target": "output", "inputs": ["t", "12"]},
        ],
    }
    with open_page(site) as opened:
        page = opened.page
        page.wait_for_function("window.ready === true")
        assert page.locator(".tb-graph-empty").is_visible()  # nothing drawn yet
        for graph in (None, {}, {"nodes": None}, {"nodes": []}, "nonsense", 42):
            page.evaluate("(g) => window.view.setGraph(g)", graph)
            assert count(page, "g.tb-graph-node") == 0
            assert page.locator(".tb-graph-empty").is_visible()
            assert "no graph" in page.locator(".tb-graph-empty").text_content()
            page.evaluate(
                """() => { const v = window.view; v.search('a'); v.select('a'); v.fit();
                           v.zoomIn(); v.zoomOut(); v.setBent(['a']); v.collapse('m');
                           v.expand('m'); return [v.selected(), v.collapsed()]; }"""
            )
        page.focus(".tb-graph")
        page.keyboard.press("ArrowDown")
        page.keyboard.press("Enter")
        page.mouse.move(500, 300)
        page.mouse.wheel(0, -200)
        page.evaluate("(g) => window.view.setGraph(g)", odd)
        assert page.locator(".tb-graph-empty").is_hidden()
        assert count(page, "g.tb-graph-node") == 12 - 2
        assert page.evaluate("() => window.pwned") is None
        assert count(page, "img") == 0
        hostile = page.locator("g.tb-graph-node", has_text="<img")
        assert hostile.count() == 1
        hostile.hover()
        assert HOSTILE in page.locator(".tb-graph-tooltip").text_content()
        t = page.locator('g.tb-graph-node[data-name="t"]')
        t.hover()
        text = page.locator(".tb-graph-tooltip").text_content()
        assert "[1, 2]" in text and "[4, 5]" in text and "int64" in text
        assert count(page, 'g.tb-graph-node[data-name="c#2"]') == 1  # a second "c"
        assert page.evaluate("() => window.view.search('ghost')") == []
        assert page.evaluate("() => window.view.select('cyc')") is True
        assert page.evaluate("() => window.view.collapse('m')") is True
        page.keyboard.press("ArrowUp")
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("Enter")
        page.evaluate("() => window.view.setBent(null)")
        page.evaluate("() => window.view.setBent('b')")
        page.evaluate("() => window.view.setBent([{}, null, 5])")
        page.evaluate("() => window.view.setGraph({nodes: [{name: 'only'}]})")
        assert count(page, "g.tb-graph-node") == 1
        assert opened.errors == []


@needs_browser
def test_nested_groups_of_a_transformer(site):
    graph = transformer_graph()
    names = [n["name"] for n in graph["nodes"]]
    with open_page(site, width=1200, height=900) as opened:
        load(opened, graph)
        page = opened.page
        assert count(page, "g.tb-graph-node") == len(names)
        assert count(page, "path.tb-graph-edge") == sum(len(n["inputs"]) for n in graph["nodes"])
        groups = page.eval_on_selector_all(
            "g.tb-graph-group", "(els) => els.map((e) => e.dataset.group)"
        )
        for group in ("blocks", "blocks.0", "blocks.0.attn", "blocks.1.mlp"):
            assert group in groups
        assert "down" not in groups  # a container whose children are called apart
        assert "blocks.0.attn" in page.evaluate("() => window.view.groups()")
        inner = page.locator('g.tb-graph-group[data-group="blocks.0.attn"] > rect').bounding_box()
        outer = page.locator('g.tb-graph-group[data-group="blocks.0"] > rect').bounding_box()
        assert outer["x"] < inner["x"] and outer["y"] < inner["y"]
        assert inner["x"] + inner["width"] < outer["x"] + outer["width"]
        assert inner["y"] + inner["height"] < outer["y"] + outer["height"]
        tops = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('g.tb-graph-node')]
                 .map((e) => [e.dataset.name, e.getBoundingClientRect().top]))"""
        )
        for n in graph["nodes"]:
            for i in n["inputs"]:
                assert tops[i] < tops[n["name"]], (i, n["name"])
        assert overlaps(page) == []
        # a nested group collapses inside its parent's frame
        page.evaluate("() => window.view.select('blocks_0_attn_q')")  # into view
        page.locator('.tb-graph-group-label[data-group="blocks.0.attn"]').click()
        box = page.locator('g.tb-graph-collapsed[data-group="blocks.0.attn"]')
        assert box.count() == 1
        assert count(page, 'g.tb-graph-group[data-group="blocks.0"]') == 1
        assert count(page, 'path[data-to-group="blocks.0.attn"]') == 1  # from the norm
        assert count(page, 'path[data-from-group="blocks.0.attn"]') == 1  # into the sum
        assert overlaps(page) == []
        page.evaluate("() => window.view.collapse('blocks')")
        assert page.evaluate("() => window.view.collapsed()") == ["blocks", "blocks.0.attn"]
        assert count(page, "g.tb-graph-collapsed") == 1
        assert count(page, 'g.tb-graph-node[data-module^="blocks"]') == 0
        assert overlaps(page) == []
        page.evaluate("() => window.view.expand('blocks')")
        assert count(page, 'g.tb-graph-collapsed[data-group="blocks.0.attn"]') == 1
        assert opened.errors == []


def largest_zoo_graph() -> dict[str, Any]:
    """The graph of the zoo's largest model (diffusers' UNet1DModel, 807 nodes)."""
    import torchbend as tb
    from tests.zoo.models import ALL

    model = next(m for m in ALL if m.name == "UNet1DModel")
    if not model.available:
        pytest.skip(f"needs {model.library}")
    module, inputs = model.build()
    bended = tb.BendedModule(module)
    bended.trace(model.method, **inputs)
    return graph_json(bended, model.method)


@needs_browser
@pytest.mark.parametrize("which", ["synthetic", "transformer", "zoo"])
def test_fit_keeps_node_names_readable(site, which):
    graph = {"synthetic": synthetic, "transformer": transformer_graph, "zoo": largest_zoo_graph}
    with open_page(site) as opened:
        load(opened, graph[which]())
        page = opened.page
        page.evaluate("() => window.view.fit()")
        scale = page.evaluate("() => window.view.getView().scale")
        font = page.evaluate(
            """() => parseFloat(getComputedStyle(
                 document.querySelector('.tb-graph-node-name, .tb-graph-collapsed text'))
               .fontSize)"""
        )
        assert font * scale >= 9, (font, scale)  # node names 9 px or more on screen
        assert overlaps(page) == []
        assert page.evaluate("() => window.view.collapsed()")  # deep groups closed to get there
        if which == "synthetic":  # shown whole
            drawn = page.locator("g.tb-graph-nodes").bounding_box()
            assert drawn["x"] >= 0 and drawn["x"] + drawn["width"] <= 1000
            assert drawn["y"] >= 0 and drawn["y"] + drawn["height"] <= 700
        assert opened.errors == []
