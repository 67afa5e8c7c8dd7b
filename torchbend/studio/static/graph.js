// torchbend studio: the graph view.
//
// GraphView draws a traced model graph (the JSON of GET /api/graph) as an SVG drawing laid out
// top to bottom in layers, with the modules the nodes belong to as nested, labelled frames that
// collapse into single boxes. Plain DOM and SVG, laid out by dagre (vendored at a pinned version
// with its licence, served by the studio next to this file: nothing is fetched from elsewhere).
// Node names come from user models: they reach the page only through textContent and
// setAttribute, never through markup.

import dagre from "../vendor/dagre-3.1.3/dagre.esm.js";

const NODE_H = 50;
const HEADER = 24;
const PAD_BOTTOM = 12;
const PAD_X = 14;
const NODESEP = 24;
const RANKSEP = 36;
const EDGESEP = 10;
const STUB = 10;
const RANKER_LIMIT = 400;
const MIN_W = 96;
const MAX_W = 248;
const CHAR_BOLD = 7.3;
const CHAR = 6.7;
const MIN_SCALE = 0.02;
const MAX_SCALE = 4;
const READABLE = 0.3;
const FIT_READABLE = 0.75;
const FIT_SMALL = 0.4;
const FIT_MARGIN = 24;
const STEP = 1.25;
const STYLE_ID = "tb-graph-style";

const CSS = `
.tb-graph{position:relative;overflow:hidden;min-height:240px;background:var(--tb-graph-bg,#14161c);
  color:#e6e9ef;font:12px/1.35 system-ui,-apple-system,"Segoe UI",sans-serif;outline:none;
  touch-action:none;user-select:none;-webkit-user-select:none}
.tb-graph:focus-visible{box-shadow:inset 0 0 0 2px var(--tb-accent,#ffb347)}
.tb-graph-svg{position:absolute;left:0;top:0;width:100%;height:100%;display:block;cursor:grab}
.tb-graph-panning .tb-graph-svg{cursor:grabbing}
.tb-graph-node,.tb-graph-collapsed,.tb-graph-group-label{cursor:pointer}
.tb-graph-node-box{fill:#232833;stroke:#4a5468;stroke-width:1.2}
.tb-graph-node:hover .tb-graph-node-box{fill:#2c3341}
.tb-graph-node-name{fill:#eef1f6;font:600 12px ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
.tb-graph-node-op{fill:#9fb0c8;font:11px ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
.tb-graph-node-shape{fill:#7f8aa0;font:11px ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
.tb-graph-op-call_module .tb-graph-node-box{stroke:#4f86c6}
.tb-graph-op-get_attr .tb-graph-node-box{stroke:#9a8650;stroke-dasharray:4 3}
.tb-graph-input .tb-graph-node-box{fill:#15342a;stroke:#3fbf86;stroke-width:1.6}
.tb-graph-output .tb-graph-node-box{fill:#2b2140;stroke:#a98bf5;stroke-width:1.6}
.tb-graph-nontensor .tb-graph-node-box{fill:#1a1e26;stroke-dasharray:3 3}
.tb-graph-nontensor .tb-graph-node-name{fill:#aab3c2}
.tb-graph-collapsed-box{fill:#253041;stroke:#6d8fb8;stroke-width:1.5}
.tb-graph-collapsed-shadow{fill:#1c2431;stroke:#4f6580;stroke-width:1}
.tb-graph-collapsed:hover .tb-graph-collapsed-box{fill:#2d3a4f}
.tb-graph-group-box{fill:rgba(120,150,210,.045);stroke:#39435a;stroke-width:1}
.tb-graph-group-label text{fill:#a9b6cc;font:600 11px system-ui,-apple-system,"Segoe UI",sans-serif}
.tb-graph-group-label .tb-graph-group-toggle{fill:#7d8ba3}
.tb-graph-group-label:hover text{fill:#ffffff}
.tb-graph-group-hit{fill:transparent}
.tb-graph-edge{fill:none;stroke:#5d6880;stroke-width:1.3;pointer-events:none}
.tb-graph-edge-back{stroke-dasharray:5 4}
.tb-graph-edge-hover{stroke:#8fb3ff;stroke-width:2}
.tb-graph-edge-active{stroke:var(--tb-accent,#ffb347);stroke-width:2.2}
.tb-graph-arrow{fill:#5d6880}
.tb-graph-arrow-hover{fill:#8fb3ff}
.tb-graph-arrow-active{fill:var(--tb-accent,#ffb347)}
.tb-graph-bent .tb-graph-node-box,.tb-graph-bent .tb-graph-collapsed-box{stroke:var(--tb-bent,#ff5c8a);stroke-width:2.2}
.tb-graph-badge rect{fill:var(--tb-bent,#ff5c8a)}
.tb-graph-badge text{fill:#1d0b12;font:700 9px system-ui,-apple-system,"Segoe UI",sans-serif;letter-spacing:.04em}
.tb-graph-match .tb-graph-node-box,.tb-graph-match .tb-graph-collapsed-box{stroke:#4cd4ff;stroke-width:2.4;fill:#1b3340}
.tb-graph-match-current .tb-graph-node-box,.tb-graph-match-current .tb-graph-collapsed-box{stroke-width:3.6}
.tb-graph-searching .tb-graph-node:not(.tb-graph-match),.tb-graph-searching .tb-graph-collapsed:not(.tb-graph-match){opacity:.35}
.tb-graph-searching .tb-graph-edge{opacity:.45}
.tb-graph-selected .tb-graph-node-box,.tb-graph-selected .tb-graph-collapsed-box{stroke:var(--tb-accent,#ffb347);stroke-width:3.2;fill:#3a3122}
.tb-graph-tooltip{position:absolute;left:0;top:0;z-index:5;pointer-events:none;max-width:380px;
  background:rgba(11,13,17,.96);border:1px solid #3b4557;border-radius:6px;padding:6px 9px;
  color:#e6e9ef;font:12px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;
  box-shadow:0 6px 18px rgba(0,0,0,.5);overflow-wrap:anywhere}
.tb-graph-tooltip[hidden]{display:none}
.tb-graph-tooltip-name{font:600 12px ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;margin-bottom:3px}
.tb-graph-tooltip-row{display:flex;gap:8px}
.tb-graph-tooltip-key{color:#8d98ab;min-width:54px;flex:none}
.tb-graph-tooltip-value{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
.tb-graph-tooltip-bent .tb-graph-tooltip-value{color:var(--tb-bent,#ff5c8a)}
.tb-graph-tooltip-hint{color:#8d98ab;margin-top:3px}
.tb-graph-empty{position:absolute;left:0;top:0;right:0;bottom:0;display:flex;align-items:center;
  justify-content:center;color:#8d98ab;font-size:14px;pointer-events:none}
.tb-graph-empty[hidden]{display:none}
.tb-graph-sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);
  clip-path:inset(50%);white-space:nowrap}
`;

let instances = 0;
let svgNamespace = null;

// -------------------------------------------------------------------------------- helpers

/** The SVG namespace, read off an element the HTML parser made (no address in this file). */
function svgNS(doc) {
  if (!svgNamespace) {
    const probe = doc.createElement("div");
    probe.innerHTML = "<svg></svg>";
    svgNamespace = probe.firstChild.namespaceURI;
  }
  return svgNamespace;
}

function svg(doc, tag, cls, attrs) {
  const e = doc.createElementNS(svgNS(doc), tag);
  if (cls) e.setAttribute("class", cls);
  if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

function html(doc, tag, cls, text) {
  const e = doc.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function injectStyle(doc) {
  if (doc.getElementById(STYLE_ID)) return;
  const style = doc.createElement("style");
  style.id = STYLE_ID;
  style.textContent = CSS;
  // First in <head>, so that the page's own style sheets win over these defaults.
  const head = doc.head || doc.documentElement;
  head.insertBefore(style, head.firstChild);
}

const clamp = (v, lo, hi) => (v < lo ? lo : v > hi ? hi : v);
const r1 = (v) => Math.round(v * 10) / 10;

function asText(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  try {
    const s = JSON.stringify(v);
    return s === undefined ? String(v) : s;
  } catch {
    return "?";
  }
}

function fitText(s, chars) {
  const n = Math.max(1, Math.floor(chars));
  return s.length <= n ? s : `${s.slice(0, Math.max(0, n - 1))}…`;
}

function cut(s, n) {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

/** A shape for reading: [1, 64, 512], or ([1, 16, 512], [1, 16]) for several tensors. */
function formatShape(shape, depth = 0) {
  if (shape === null || shape === undefined) return "—";
  if (Array.isArray(shape)) {
    if (depth > 4) return "…";
    if (shape.every((d) => d === null || typeof d !== "object")) {
      return `[${shape.map((d) => (d === null ? "?" : asText(d))).join(", ")}]`;
    }
    return cut(`(${shape.map((s) => formatShape(s, depth + 1)).join(", ")})`, 400);
  }
  return cut(asText(shape), 200);
}

/** A shape for a node's third line: 1×64×512, or (1×16×512, 1×16). */
function compactShape(shape, depth = 0) {
  if (shape === null || shape === undefined) return "";
  if (Array.isArray(shape)) {
    if (depth > 4) return "…";
    if (shape.length === 0) return "scalar";
    if (shape.every((d) => d === null || typeof d !== "object")) {
      return shape.map((d) => (d === null ? "?" : asText(d))).join("×");
    }
    return `(${shape.map((s) => compactShape(s, depth + 1) || "·").join(", ")})`;
  }
  return asText(shape);
}

function formatDtype(dtype) {
  if (dtype === null || dtype === undefined) return "—";
  if (Array.isArray(dtype)) {
    const flat = dtype.flat(8).filter((d) => d !== null && d !== undefined);
    const uniq = [...new Set(flat.map(asText))];
    return uniq.length ? cut(uniq.join(", "), 120) : "—";
  }
  return cut(asText(dtype), 120);
}

function shortCallable(target) {
  let m = /^<built-in (?:function|method) ([\w.]+)/.exec(target);
  if (m) return m[1];
  m = /^<function ([\w.<>]+)/.exec(target);
  const s = m ? m[1] : target;
  const parts = s.split(".").filter(Boolean);
  return parts.length ? parts[parts.length - 1] : s;
}

function opLine(op, target) {
  switch (op) {
    case "placeholder":
      return "input";
    case "output":
      return "output";
    case "call_module":
      return target || "module";
    case "call_function":
      return `${shortCallable(target) || "function"}()`;
    case "call_method":
      return `.${target || "method"}()`;
    case "get_attr":
      return `attr ${target}`;
    default:
      return op ? (target ? `${op} ${target}` : op) : target || "?";
  }
}

function widthFor(line1, line2, line3) {
  const want = Math.max(line1.length * CHAR_BOLD, line2.length * CHAR, line3.length * CHAR) + 22;
  return clamp(Math.ceil(want), MIN_W, MAX_W);
}

// -------------------------------------------------------------------------------- the model

/** The graph JSON made safe: unique names, known inputs only, module groups and their blocks. */
function buildModel(graph) {
  const raw = graph && typeof graph === "object" && Array.isArray(graph.nodes) ? graph.nodes : [];
  const nodes = [];
  const index = new Map();
  for (let i = 0; i < raw.length; i++) {
    if (!raw[i] || typeof raw[i] !== "object" || Array.isArray(raw[i])) continue;
    const r = raw[i];
    let name = asText(r.name) || `node_${i}`;
    if (index.has(name)) {
      let k = 2;
      while (index.has(`${name}#${k}`)) k += 1;
      name = `${name}#${k}`;
    }
    const op = asText(r.op);
    const target = asText(r.target);
    let module = typeof r.module === "string" ? r.module : "";
    if (r.module === undefined && op === "call_module") module = target;
    const shape = r.shape === undefined ? null : r.shape;
    const line2 = opLine(op, target);
    const line3 = compactShape(shape);
    nodes.push({
      index: nodes.length,
      name,
      op,
      target,
      module,
      path: module.split(".").filter(Boolean),
      shape,
      dtype: r.dtype === undefined ? null : r.dtype,
      tensor: typeof r.tensor === "boolean" ? r.tensor : shape !== null,
      bent: r.bent === true,
      rawInputs: Array.isArray(r.inputs) ? r.inputs : [],
      inputs: [],
      outputs: [],
      unknown: [],
      blocks: [],
      line2,
      line3,
      w: widthFor(name, line2, line3),
    });
    index.set(name, nodes.length - 1);
  }
  for (const node of nodes) {
    for (const x of node.rawInputs) {
      const s = asText(x);
      const j = index.get(s);
      if (j === undefined) {
        if (!node.unknown.includes(s)) node.unknown.push(s);
      } else if (j !== node.index && !node.inputs.includes(j)) {
        node.inputs.push(j);
        nodes[j].outputs.push(node.index);
      }
    }
  }
  // Groups: every dotted prefix of a module path. A group's nodes fall into blocks: the parts
  // connected by edges inside it (a module called twice, or a container whose children are
  // called apart, is drawn as several frames).
  const groups = new Map();
  for (const node of nodes) {
    let p = "";
    for (let k = 0; k < node.path.length; k++) {
      p = k ? `${p}.${node.path[k]}` : node.path[k];
      let g = groups.get(p);
      if (!g) {
        g = { path: p, depth: k, members: [], blocks: [] };
        groups.set(p, g);
      }
      g.members.push(node.index);
    }
  }
  const blocks = [];
  for (const g of groups.values()) {
    const m = g.members;
    const local = new Map();
    for (let k = 0; k < m.length; k++) local.set(m[k], k);
    const parent = new Int32Array(m.length);
    for (let k = 0; k < m.length; k++) parent[k] = k;
    const find = (k) => {
      while (parent[k] !== k) {
        parent[k] = parent[parent[k]];
        k = parent[k];
      }
      return k;
    };
    for (let k = 0; k < m.length; k++) {
      for (const j of nodes[m[k]].inputs) {
        const kj = local.get(j);
        if (kj !== undefined) {
          const a = find(k);
          const b = find(kj);
          if (a !== b) parent[a] = b;
        }
      }
    }
    const blockOfRoot = new Map();
    for (let k = 0; k < m.length; k++) {
      const root = find(k);
      let b = blockOfRoot.get(root);
      if (b === undefined) {
        b = blocks.length;
        blockOfRoot.set(root, b);
        blocks.push({ id: b, group: g.path, depth: g.depth, members: [], parent: -1 });
        g.blocks.push(b);
      }
      blocks[b].members.push(m[k]);
      nodes[m[k]].blocks[g.depth] = b;
    }
  }
  for (const b of blocks) {
    b.size = b.members.length;
    if (b.depth > 0) b.parent = nodes[b.members[0]].blocks[b.depth - 1];
  }
  return { nodes, index, groups, blocks };
}

/** What a collapsed block shows: its output shape (of its last node read from outside). */
function blockSummary(model, b) {
  const block = model.blocks[b];
  let out = null;
  for (let k = block.members.length - 1; k >= 0 && out === null; k--) {
    const node = model.nodes[block.members[k]];
    for (const j of node.outputs) {
      if (model.nodes[j].blocks[block.depth] !== b) {
        out = node;
        break;
      }
    }
  }
  if (out === null && block.members.length) out = model.nodes[block.members[block.members.length - 1]];
  const title = `▸ ${block.group}`;
  const line2 = `${block.size} node${block.size === 1 ? "" : "s"}`;
  const line3 = out ? compactShape(out.shape) : "";
  return { title, line2, line3, shape: out ? out.shape : null, w: widthFor(title, line2, line3) };
}

// -------------------------------------------------------------------------------- the layout
//
// Each framed module block is laid out on its own, innermost first, as one small flat layered
// graph by dagre: its items are its nodes, its collapsed boxes and its framed sub-blocks (boxes
// sized by their own layout). An edge between units of different blocks counts, for the
// ranking, as an edge between the two items that hold its ends in their nearest common block;
// it is drawn afterwards from port to port, out through the bottom borders of the frames it
// leaves, through dagre's bend points at that level, in through the top borders of those it enters. Every level stays small, so layout stays fast.

function newLeaf(kind, node, block) {
  return { kind, node, block, x: 0, y: 0, w: 0, h: NODE_H, layer: 0, slot: 0, ins: [], outs: [], container: null, isContainer: false };
}

/** Lay out container `c` whose items already have their sizes; sets `c.w`, `c.h` and the
 * items' places relative to `c`, and the bend points of the edges lifted to this level. */
function layoutLevel(c) {
  if (!c.items.length) {
    c.w = 0;
    c.h = 0;
    return;
  }
  const g = new dagre.graphlib.Graph({ multigraph: false, compound: false });
  const ranker = c.items.length > RANKER_LIMIT ? "longest-path" : "network-simplex";
  g.setGraph({ rankdir: "TB", nodesep: NODESEP, ranksep: RANKSEP, edgesep: EDGESEP, marginx: 0, marginy: 0, acyclicer: "greedy", ranker });
  g.setDefaultEdgeLabel(() => ({}));
  for (let k = 0; k < c.items.length; k++) g.setNode(String(k), { width: c.items[k].w, height: c.items[k].h });
  for (const le of c.lifted.values()) g.setEdge(String(le.a), String(le.b), { weight: le.count, minlen: 1 });
  dagre.layout(g);
  const size = g.graph();
  const inner = { w: size.width || 0, h: size.height || 0 };
  const framed = c.block >= 0;
  c.w = framed ? Math.max(inner.w + 2 * PAD_X, c.minW) : inner.w;
  c.h = framed ? HEADER + inner.h + PAD_BOTTOM : inner.h;
  const ox = framed ? (c.w - inner.w) / 2 : 0;
  const oy = framed ? HEADER : 0;
  for (let k = 0; k < c.items.length; k++) {
    const it = c.items[k];
    const p = g.node(String(k));
    it.rx = ox + p.x - it.w / 2;
    it.ry = oy + p.y - it.h / 2;
  }
  for (const le of c.lifted.values()) {
    const e = g.edge(String(le.a), String(le.b));
    le.points = e && Array.isArray(e.points) ? e.points.map((p) => ({ x: ox + p.x, y: oy + p.y })) : [];
  }
}

/** Place `c` (its items laid out) at (x, y), and its items, in world coordinates. */
function place(c, x, y) {
  c.x = x;
  c.top = y;
  c.bottom = y + c.h;
  for (const it of c.items) {
    if (it.isContainer) place(it, x + it.rx, y + it.ry);
    else {
      it.x = x + it.rx;
      it.y = y + it.ry;
    }
  }
  for (const le of c.lifted.values()) for (const p of le.points) {
    p.x += x;
    p.y += y;
  }
}

/** A smooth path through `pts` (a quadratic B-spline: it bends at the points' midpoints). */
function spline(pts) {
  let d = `M${r1(pts[0].x)},${r1(pts[0].y)}`;
  for (let i = 1; i < pts.length - 1; i++) {
    const p = pts[i];
    const q = pts[i + 1];
    d += `Q${r1(p.x)},${r1(p.y)} ${r1((p.x + q.x) / 2)},${r1((p.y + q.y) / 2)}`;
  }
  const last = pts[pts.length - 1];
  return `${d}L${r1(last.x)},${r1(last.y)}`;
}

function computeLayout(model, collapsed) {
  const { nodes, blocks } = model;
  const n = nodes.length;
  const leaves = [];
  const unitOfNode = new Int32Array(n);
  const unitOfBlock = new Map();
  for (let i = 0; i < n; i++) {
    let box = -1;
    if (collapsed.size) {
      for (const b of nodes[i].blocks) {
        if (collapsed.has(blocks[b].group)) {
          box = b;
          break;
        }
      }
    }
    if (box < 0) {
      unitOfNode[i] = leaves.length;
      const leaf = newLeaf("node", i, -1);
      leaf.w = nodes[i].w;
      leaves.push(leaf);
    } else {
      let u = unitOfBlock.get(box);
      if (u === undefined) {
        u = leaves.length;
        unitOfBlock.set(box, u);
        const leaf = newLeaf("box", -1, box);
        leaf.summary = blockSummary(model, box);
        leaf.w = leaf.summary.w;
        leaves.push(leaf);
      }
      unitOfNode[i] = u;
    }
  }
  const U = leaves.length;

  // Edges between units, one per pair.
  const edges = [];
  const seen = new Map();
  for (let i = 0; i < n; i++) {
    const b = unitOfNode[i];
    for (const j of nodes[i].inputs) {
      const a = unitOfNode[j];
      if (a === b) continue;
      const key = a * U + b;
      let e = seen.get(key);
      if (e === undefined) {
        e = { from: a, to: b, count: 0, back: false, lift: null, sx: 0, tx: 0, d: "" };
        e.active = false;
        e.hover = false;
        e.el = null;
        seen.set(key, e);
        edges.push(e);
        leaves[a].outs.push(e);
        leaves[b].ins.push(e);
      }
      e.count += 1;
    }
  }

  // Containers: the framed blocks (two nodes or more, expanded), nested, and the root.
  const root = { isContainer: true, block: -1, parent: null, items: [], depth: 0, lifted: new Map() };
  const containers = [root];
  const containerOfBlock = new Map();
  const framed = (b) => blocks[b].size >= 2 && !collapsed.has(blocks[b].group);
  const containerFor = (b) => {
    if (b < 0) return root;
    let c = containerOfBlock.get(b);
    if (c) return c;
    let p = blocks[b].parent;
    while (p >= 0 && !framed(p)) p = blocks[p].parent;
    const parent = containerFor(p);
    c = { isContainer: true, block: b, parent, items: [], depth: parent.depth + 1, lifted: new Map() };
    const path = blocks[b].group;
    const pp = parent.block >= 0 ? blocks[parent.block].group : "";
    c.label = pp && path.startsWith(`${pp}.`) ? path.slice(pp.length + 1) : path;
    c.caption = `${c.label} (${blocks[b].size})`;
    c.minW = c.caption.length * CHAR + 40;
    c.slot = parent.items.length;
    containerOfBlock.set(b, c);
    containers.push(c);
    parent.items.push(c);
    return c;
  };
  for (let u = 0; u < U; u++) {
    const leaf = leaves[u];
    let c = root;
    if (leaf.kind === "node") {
      const bs = nodes[leaf.node].blocks;
      for (let k = bs.length - 1; k >= 0; k--) {
        if (framed(bs[k])) {
          c = containerFor(bs[k]);
          break;
        }
      }
    } else {
      let p = blocks[leaf.block].parent;
      while (p >= 0 && !framed(p)) p = blocks[p].parent;
      c = containerFor(p);
    }
    leaf.container = c;
    leaf.slot = c.items.length;
    c.items.push(leaf);
  }

  // Each edge lifted to its ends' nearest common container, one per pair of items there.
  for (const e of edges) {
    let x = leaves[e.from];
    let y = leaves[e.to];
    let cx = x.container;
    let cy = y.container;
    while (cx.depth > cy.depth) [x, cx] = [cx, cx.parent];
    while (cy.depth > cx.depth) [y, cy] = [cy, cy.parent];
    while (cx !== cy) {
      [x, cx] = [cx, cx.parent];
      [y, cy] = [cy, cy.parent];
    }
    const key = x.slot * cx.items.length + y.slot;
    let le = cx.lifted.get(key);
    if (!le) {
      le = { a: x.slot, b: y.slot, count: 0, points: [], level: cx };
      cx.lifted.set(key, le);
    }
    le.count += e.count;
    e.lift = le;
  }

  // Innermost first (a container comes after its parent in `containers`), then placed from the root.
  for (let k = containers.length - 1; k >= 0; k--) {
    const c = containers[k];
    layoutLevel(c);
  }
  place(root, 0, 0);

  // Edge ports (spread along the box's edge, ordered by where the other end is) and paths.
  const centre = (k) => leaves[k].x + leaves[k].w / 2;
  const spread = (list, leaf, key, field) => {
    const k = list.length;
    if (!k) return;
    const c = leaf.x + leaf.w / 2;
    if (k === 1) {
      list[0][field] = c;
      return;
    }
    const keyed = list.map((e) => [key(e), e]).sort((a, b) => a[0] - b[0]);
    const step = Math.min(12, Math.max(2, (leaf.w - 24) / (k - 1)));
    for (let i = 0; i < k; i++) keyed[i][1][field] = c + (i - (k - 1) / 2) * step;
  };
  for (let u = 0; u < U; u++) {
    spread(leaves[u].ins, leaves[u], (e) => centre(e.from), "tx");
    spread(leaves[u].outs, leaves[u], (e) => centre(e.to), "sx");
  }
  for (const e of edges) {
    const a = leaves[e.from];
    const b = leaves[e.to];
    const y1 = a.y + NODE_H;
    const y2 = b.y - 1;
    e.back = b.y <= a.y;
    const pts = [{ x: e.sx, y: y1 }, { x: e.sx, y: y1 + STUB }];
    // Out through the bottom borders of the frames the source sits in, below the common one,
    // along that level's bend points, and in through the top borders of the target's frames.
    const lca = e.lift.level;
    for (let c = a.container; c !== lca; c = c.parent) pts.push({ x: clamp(e.sx, c.x + PAD_X, c.x + c.w - PAD_X), y: c.bottom });
    const bends = e.lift.points;
    for (let k = 1; k < bends.length - 1; k++) pts.push(bends[k]);
    const entries = [];
    for (let c = b.container; c !== lca; c = c.parent) entries.push({ x: clamp(e.tx, c.x + PAD_X, c.x + c.w - PAD_X), y: c.top });
    for (let k = entries.length - 1; k >= 0; k--) pts.push(entries[k]);
    pts.push({ x: e.tx, y: y2 - STUB }, { x: e.tx, y: y2 });
    e.d = spline(pts);
  }

  // Rows for the keyboard (units whose tops are within half a box of each other), and the bounds.
  const byTop = Array.from({ length: U }, (_, u) => u).sort((p, q) => leaves[p].y - leaves[q].y || centre(p) - centre(q));
  const rows = [];
  let rowTop = -Infinity;
  for (const u of byTop) {
    if (leaves[u].y > rowTop + NODE_H / 2) {
      rows.push([]);
      rowTop = leaves[u].y;
    }
    leaves[u].layer = rows.length - 1;
    rows[rows.length - 1].push(u);
  }
  for (const row of rows) row.sort((a, b) => centre(a) - centre(b));
  const rowIndex = new Int32Array(U);
  for (const row of rows) for (let k = 0; k < row.length; k++) rowIndex[row[k]] = k;
  return {
    leaves,
    units: U,
    edges,
    containers,
    unitOfNode,
    unitOfBlock,
    rows,
    rowIndex,
    bounds: { x: 0, y: 0, w: root.w || 0, h: root.h || 0 },
  };
}

// -------------------------------------------------------------------------------- the view

export class GraphView {
  /**
   * @param {HTMLElement} container where to draw (made focusable; its size is the page's)
   * @param {{onSelect?: (name: string) => void, onHover?: (name: string|null) => void}} options
   */
  constructor(container, options = {}) {
    if (!container || typeof container.appendChild !== "function") {
      throw new TypeError("GraphView needs a container element");
    }
    const doc = container.ownerDocument || document;
    injectStyle(doc);
    instances += 1;
    this._id = instances;
    this._doc = doc;
    this._c = container;
    this._opt = options && typeof options === "object" ? options : {};
    this._model = buildModel(null);
    this._L = computeLayout(this._model, new Set());
    this._collapsed = new Set();
    this._bent = new Set();
    this._selected = null;
    this._cursorBlock = -1;
    this._matches = [];
    this._query = "";
    this._painted = { sel: null, matches: [], hover: null };
    this._view = { x: 0, y: 0, s: 1 };
    this._auto = "initial";
    this._sized = null;
    this._unitEls = [];
    this._signature = null;

    container.classList.add("tb-graph");
    if (!container.hasAttribute("tabindex")) container.tabIndex = 0;
    if (!container.hasAttribute("role")) container.setAttribute("role", "application");
    if (!container.hasAttribute("aria-label")) container.setAttribute("aria-label", "model graph");
    const help = html(
      doc,
      "div",
      "tb-graph-sr",
      "Arrow keys move between nodes: up to a parent, down to a child, left and right along " +
        "the row. Enter selects, C collapses the node's module, plus and minus zoom, 0 fits.",
    );
    help.id = `tb-graph-help-${this._id}`;
    container.setAttribute("aria-describedby", help.id);
    this._live = html(doc, "div", "tb-graph-sr");
    this._live.setAttribute("aria-live", "polite");

    this._svg = svg(doc, "svg", "tb-graph-svg", { "aria-hidden": "true" });
    const defs = svg(doc, "defs");
    this._markers = {};
    for (const kind of ["", "hover", "active"]) {
      const id = `tb-graph-arrow-${this._id}${kind ? `-${kind}` : ""}`;
      const marker = svg(doc, "marker", null, {
        id,
        viewBox: "0 0 10 10",
        refX: "9",
        refY: "5",
        markerWidth: "9",
        markerHeight: "9",
        markerUnits: "userSpaceOnUse",
        orient: "auto",
      });
      marker.append(svg(doc, "path", kind ? `tb-graph-arrow tb-graph-arrow-${kind}` : "tb-graph-arrow", { d: "M0,1 L10,5 L0,9 z" }));
      defs.append(marker);
      this._markers[kind || "normal"] = `url(#${id})`;
    }
    this._viewport = svg(doc, "g", "tb-graph-viewport");
    this._gGroups = svg(doc, "g", "tb-graph-groups");
    this._gEdges = svg(doc, "g", "tb-graph-edges");
    this._gNodes = svg(doc, "g", "tb-graph-nodes");
    this._viewport.append(this._gGroups, this._gEdges, this._gNodes);
    this._svg.append(defs, this._viewport);
    this._tip = html(doc, "div", "tb-graph-tooltip");
    this._tip.setAttribute("role", "tooltip");
    this._tip.hidden = true;
    this._empty = html(doc, "div", "tb-graph-empty", "no graph");
    container.append(this._svg, this._tip, this._empty, help, this._live);
    this._helpEl = help;

    this._handlers = {
      pointerdown: (e) => this._onPointerDown(e),
      pointermove: (e) => this._onPointerMove(e),
      pointerup: (e) => this._onPointerUp(e),
      pointercancel: (e) => this._onPointerUp(e),
      click: (e) => this._onClick(e),
      pointerover: (e) => this._onOver(e),
      pointerout: (e) => this._onOut(e),
      pointerleave: () => this._hover(-1),
      wheel: (e) => this._onWheel(e),
      keydown: (e) => this._onKey(e),
      blur: () => this._hideTip(),
    };
    const h = this._handlers;
    this._svg.addEventListener("pointerdown", h.pointerdown);
    this._svg.addEventListener("pointermove", h.pointermove);
    this._svg.addEventListener("pointerup", h.pointerup);
    this._svg.addEventListener("pointercancel", h.pointercancel);
    this._svg.addEventListener("click", h.click);
    this._svg.addEventListener("pointerover", h.pointerover);
    this._svg.addEventListener("pointerout", h.pointerout);
    this._svg.addEventListener("pointerleave", h.pointerleave);
    container.addEventListener("wheel", h.wheel, { passive: false });
    container.addEventListener("keydown", h.keydown);
    container.addEventListener("blur", h.blur);
    this._drag = null;
    this._resize = null;
    if (typeof ResizeObserver === "function") {
      this._resize = new ResizeObserver(() => {
        this._measure();
        if (this._auto) this._autoView(this._auto);
      });
      this._resize.observe(container);
    }
    this._render();
    this._applyView();
  }

  // ------------------------------------------------------------------------ public API

  /** Draw a graph (the JSON of GET /api/graph). The same nodes again keep the view as it is. */
  setGraph(graph) {
    this._measure();
    const model = buildModel(graph);
    const signature = model.nodes.map((nd) => `${nd.name}<${nd.inputs.join(",")}`).join("|");
    const same = signature === this._signature && model.nodes.length > 0;
    this._signature = signature;
    this._model = model;
    this._collapsed = new Set([...this._collapsed].filter((g) => model.groups.has(g)));
    this._bent = new Set(model.nodes.filter((nd) => nd.bent).map((nd) => nd.name));
    if (this._selected !== null && !model.index.has(this._selected)) this._selected = null;
    this._cursorBlock = -1;
    if (!same) {
      this._matches = [];
      this._query = "";
    } else if (this._query) {
      this._matches = this._findMatches(this._query) || [];
    }
    this._relayout();
    if (!same || this._auto) this._autoView(same && this._auto ? this._auto : "initial");
  }

  /**
   * Highlight the nodes whose name, target or module contains `query` (case-insensitive), or
   * match it when it is written /regex/flags; centre the first. Returns the names, in graph
   * order ([] for an empty query or a regex that does not compile).
   */
  search(query) {
    const q = typeof query === "string" ? query.trim() : asText(query).trim();
    const found = q ? this._findMatches(q) : [];
    this._query = q;
    this._c.classList.toggle("tb-graph-search-invalid", found === null);
    this._matches = found || [];
    this._paintMatches();
    if (this._matches.length) {
      const u = this._L.unitOfNode[this._model.index.get(this._matches[0])];
      this._centreOn(u);
    }
    return this._matches.slice();
  }

  /** Select a node: highlight it, centre it (opening collapsed groups that hide it), call onSelect. */
  select(name) {
    if (name === null || name === undefined) {
      this._selected = null;
      this._cursorBlock = -1;
      this._paintSelection();
      return false;
    }
    const i = this._model.index.get(asText(name));
    if (i === undefined) return false;
    const node = this._model.nodes[i];
    const hiding = node.blocks.map((b) => this._model.blocks[b].group).filter((g) => this._collapsed.has(g));
    if (hiding.length) {
      for (const g of hiding) this._collapsed.delete(g);
      this._relayout();
    }
    this._selected = node.name;
    this._cursorBlock = -1;
    this._paintSelection();
    this._centreOn(this._L.unitOfNode[i]);
    this._notifySelect(node.name);
    return true;
  }

  /** The selected node's name, or null. */
  selected() {
    return this._selected;
  }

  /** Mark these nodes (names; unknown ones are ignored) as bent, and only these. */
  setBent(names) {
    const next = new Set();
    if (names && typeof names !== "string" && typeof names[Symbol.iterator] === "function") {
      for (const x of names) {
        const s = asText(x);
        if (this._model.index.has(s)) next.add(s);
      }
    } else if (typeof names === "string" && this._model.index.has(names)) {
      next.add(names);
    }
    this._bent = next;
    this._paintBent();
  }

  /** The names of the nodes marked bent, in graph order. */
  bent() {
    return this._model.nodes.filter((nd) => this._bent.has(nd.name)).map((nd) => nd.name);
  }

  zoomIn() {
    const { w, h } = this._size();
    this._zoomAt(w / 2, h / 2, STEP);
  }

  zoomOut() {
    const { w, h } = this._size();
    this._zoomAt(w / 2, h / 2, 1 / STEP);
  }

  /**
   * Show the graph, readable: the whole drawing when its node names are 9 px or more on
   * screen (scale FIT_READABLE); otherwise the deepest module groups collapsed, one depth at a
   * time, until it is (they stay listed by collapsed(); expanding one opens it). A small graph
   * that no collapsing makes that large (a chain outside any module) is shown whole when that
   * keeps it at FIT_SMALL or more; a big one is shown with its groups collapsed to the top
   * level, at FIT_READABLE, from its inputs (the rest a pan away).
   */
  fit() {
    this._autoView(this._collapseToRead() ? "read" : "fit");
  }

  /** The scale at which `bounds` fill the view (less its margins). */
  _fitScale(bounds) {
    const { w, h } = this._size();
    return Math.min((w - 2 * FIT_MARGIN) / Math.max(bounds.w, 1), (h - 2 * FIT_MARGIN) / Math.max(bounds.h, 1));
  }

  /** Collapse groups for fit(); true when even then the whole drawing is too small to read. */
  _collapseToRead() {
    const whole = this._fitScale(this._L.bounds);
    if (!this._L.units || whole >= FIT_READABLE) return false;
    // Only groups drawn as frames (a block of two nodes or more): a box for one node saves nothing.
    const blocks = this._model.blocks;
    const groups = [...this._model.groups.values()].filter((g) => g.blocks.some((b) => blocks[b].size >= 2));
    const depths = [...new Set(groups.map((g) => g.depth))].sort((a, b) => b - a);
    let set = null;
    let layout = null;
    for (const d of depths) {
      const before = set ? set.size : this._collapsed.size;
      set = new Set(set || this._collapsed);
      for (const g of groups) if (g.depth >= d) set.add(g.path);
      if (layout && set.size === before) continue;
      layout = computeLayout(this._model, set);
      if (this._fitScale(layout.bounds) >= FIT_READABLE) break;
    }
    const readable = layout !== null && this._fitScale(layout.bounds) >= FIT_READABLE;
    if (!readable && (whole >= FIT_SMALL || layout === null)) return false;
    this._collapsed = set;
    this._hideTip();
    this._hoverUnit = -1;
    this._L = layout;
    this._render();
    return !readable;
  }

  /** Collapse a group (a module path prefix like "encoder" or "encoder.0") into one box. */
  collapse(group) {
    const g = asText(group);
    if (!this._model.groups.has(g) || this._collapsed.has(g)) return false;
    const anchor = this._anchor(g);
    this._collapsed.add(g);
    this._relayout();
    this._keepAnchor(g, anchor);
    return true;
  }

  /** Expand a collapsed group back into its nodes. */
  expand(group) {
    const g = asText(group);
    if (!this._collapsed.has(g)) return false;
    const anchor = this._anchor(g);
    this._collapsed.delete(g);
    this._relayout();
    this._keepAnchor(g, anchor);
    return true;
  }

  /** Expand every collapsed group. */
  expandAll() {
    if (!this._collapsed.size) return;
    this._collapsed.clear();
    this._relayout();
  }

  /** The collapsed groups, in the order of the graph. */
  collapsed() {
    return [...this._model.groups.keys()].filter((g) => this._collapsed.has(g));
  }

  /** Every group (module path prefix) of the graph, in the order they first appear. */
  groups() {
    return [...this._model.groups.keys()];
  }

  /** The view's transform: screen = world * scale + (x, y). */
  getView() {
    return { x: this._view.x, y: this._view.y, scale: this._view.s };
  }

  /** Remove listeners and what the view added to the container. */
  destroy() {
    const h = this._handlers;
    for (const k of ["pointerdown", "pointermove", "pointerup", "pointercancel", "click", "pointerover", "pointerout", "pointerleave"]) {
      this._svg.removeEventListener(k, h[k]);
    }
    this._c.removeEventListener("wheel", h.wheel);
    this._c.removeEventListener("keydown", h.keydown);
    this._c.removeEventListener("blur", h.blur);
    if (this._resize) this._resize.disconnect();
    for (const e of [this._svg, this._tip, this._empty, this._helpEl, this._live]) e.remove();
    this._c.classList.remove("tb-graph");
  }

  // ------------------------------------------------------------------------ layout and drawing

  _relayout() {
    this._hideTip();
    this._hoverUnit = -1;
    this._L = computeLayout(this._model, this._collapsed);
    this._render();
  }

  _render() {
    const doc = this._doc;
    const L = this._L;
    const model = this._model;
    this._gGroups.replaceChildren();
    this._gEdges.replaceChildren();
    this._gNodes.replaceChildren();
    this._painted = { sel: null, matches: [], hover: null };
    this._empty.hidden = L.units > 0;
    this._unitEls = new Array(L.units);
    if (!L.units) return;

    const groupsFrag = doc.createDocumentFragment();
    for (const c of L.containers) {
      if (c.block < 0) continue;
      const block = model.blocks[c.block];
      const g = svg(doc, "g", "tb-graph-group", { "data-group": block.group, "data-depth": String(c.depth) });
      g.append(
        svg(doc, "rect", "tb-graph-group-box", {
          x: r1(c.x),
          y: r1(c.top),
          width: r1(c.w),
          height: r1(c.bottom - c.top),
          rx: "10",
        }),
      );
      const label = svg(doc, "g", "tb-graph-group-label", {
        "data-group": block.group,
        transform: `translate(${r1(c.x + 8)},${r1(c.top + 3)})`,
      });
      const title = svg(doc, "title");
      title.textContent = `${block.group}: ${block.size} nodes (click to collapse)`;
      const caption = svg(doc, "text", "tb-graph-group-name", { x: "14", y: "14" });
      caption.textContent = fitText(c.caption, (c.w - 36) / CHAR);
      const toggle = svg(doc, "text", "tb-graph-group-toggle", { x: "0", y: "14" });
      toggle.textContent = "▾";
      label.append(
        title,
        svg(doc, "rect", "tb-graph-group-hit", { x: "-4", y: "0", width: r1(Math.min(c.w - 8, c.minW)), height: "19" }),
        toggle,
        caption,
      );
      g.append(label);
      groupsFrag.append(g);
    }
    this._gGroups.append(groupsFrag);

    const edgesFrag = doc.createDocumentFragment();
    for (const e of L.edges) {
      const path = svg(doc, "path", e.back ? "tb-graph-edge tb-graph-edge-back" : "tb-graph-edge", {
        d: e.d,
        "marker-end": this._markers.normal,
      });
      const a = L.leaves[e.from];
      const b = L.leaves[e.to];
      if (a.kind === "node") path.setAttribute("data-from", model.nodes[a.node].name);
      else path.setAttribute("data-from-group", model.blocks[a.block].group);
      if (b.kind === "node") path.setAttribute("data-to", model.nodes[b.node].name);
      else path.setAttribute("data-to-group", model.blocks[b.block].group);
      if (e.count > 1) path.setAttribute("data-count", String(e.count));
      e.el = path;
      edgesFrag.append(path);
    }
    this._gEdges.append(edgesFrag);

    const nodesFrag = doc.createDocumentFragment();
    for (let u = 0; u < L.units; u++) {
      const leaf = L.leaves[u];
      const el = leaf.kind === "node" ? this._nodeEl(leaf, u) : this._boxEl(leaf, u);
      this._unitEls[u] = el;
      nodesFrag.append(el);
    }
    this._gNodes.append(nodesFrag);
    this._paintBent();
    this._paintMatches();
    this._paintSelection();
  }

  _nodeEl(leaf, u) {
    const doc = this._doc;
    const node = this._model.nodes[leaf.node];
    const op = node.op.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 32);
    let cls = "tb-graph-node";
    if (op) cls += ` tb-graph-op-${op}`;
    if (node.op === "placeholder") cls += " tb-graph-input";
    if (node.op === "output") cls += " tb-graph-output";
    if (!node.tensor && node.op !== "output") cls += " tb-graph-nontensor";
    const g = svg(doc, "g", cls, {
      "data-name": node.name,
      "data-op": node.op,
      "data-module": node.module,
      "data-unit": String(u),
      transform: `translate(${r1(leaf.x)},${r1(leaf.y)})`,
    });
    const title = svg(doc, "title");
    title.textContent = this._describe(node, "\n");
    const pill = node.op === "placeholder" || node.op === "output";
    const rect = svg(doc, "rect", "tb-graph-node-box", {
      width: leaf.w,
      height: NODE_H,
      rx: pill ? "16" : "6",
    });
    const pad = pill ? 14 : 10;
    const t1 = svg(doc, "text", "tb-graph-node-name", { x: pad, y: "17" });
    t1.textContent = fitText(node.name, (leaf.w - 2 * pad) / CHAR_BOLD);
    const t2 = svg(doc, "text", "tb-graph-node-op", { x: pad, y: "32" });
    t2.textContent = fitText(node.line2, (leaf.w - 2 * pad) / CHAR);
    g.append(title, rect, t1, t2);
    if (node.line3) {
      const t3 = svg(doc, "text", "tb-graph-node-shape", { x: pad, y: "45" });
      t3.textContent = fitText(node.line3, (leaf.w - 2 * pad) / CHAR);
      g.append(t3);
    }
    return g;
  }

  _boxEl(leaf, u) {
    const doc = this._doc;
    const block = this._model.blocks[leaf.block];
    const s = leaf.summary;
    const g = svg(doc, "g", "tb-graph-collapsed", {
      "data-group": block.group,
      "data-block": String(block.id),
      "data-unit": String(u),
      transform: `translate(${r1(leaf.x)},${r1(leaf.y)})`,
    });
    const title = svg(doc, "title");
    title.textContent = `${block.group}: ${block.size} nodes, collapsed (click to expand)\nshape: ${formatShape(s.shape)}`;
    g.append(
      title,
      svg(doc, "rect", "tb-graph-collapsed-shadow", { x: "4", y: "4", width: leaf.w, height: NODE_H, rx: "7" }),
      svg(doc, "rect", "tb-graph-collapsed-box", { width: leaf.w, height: NODE_H, rx: "7" }),
    );
    const lines = [
      [s.title, "tb-graph-node-name", CHAR_BOLD, 17],
      [s.line2, "tb-graph-node-op", CHAR, 32],
      [s.line3, "tb-graph-node-shape", CHAR, 45],
    ];
    for (const [text, cls, cw, y] of lines) {
      if (!text) continue;
      const t = svg(doc, "text", cls, { x: "10", y: String(y) });
      t.textContent = fitText(text, (leaf.w - 20) / cw);
      g.append(t);
    }
    return g;
  }

  _describe(node, sep) {
    const lines = [
      node.name,
      `${node.op || "?"}${node.target ? `: ${node.target}` : ""}`,
      `module: ${node.module || "—"}`,
      `shape: ${formatShape(node.shape)}`,
      `dtype: ${formatDtype(node.dtype)}`,
    ];
    if (this._bent.has(node.name)) lines.push("bent");
    return lines.join(sep);
  }

  // ------------------------------------------------------------------------ painting states

  _unitName(u) {
    const leaf = this._L.leaves[u];
    return leaf && leaf.kind === "node" ? this._model.nodes[leaf.node].name : null;
  }

  _cursorUnit() {
    const L = this._L;
    if (this._cursorBlock >= 0) {
      const u = L.unitOfBlock.get(this._cursorBlock);
      if (u !== undefined) return u;
    }
    if (this._selected !== null) {
      const i = this._model.index.get(this._selected);
      if (i !== undefined) return L.unitOfNode[i];
    }
    return -1;
  }

  _edgeState(e, field, on) {
    e[field] = on;
    if (!e.el) return;
    e.el.classList.toggle(field === "active" ? "tb-graph-edge-active" : "tb-graph-edge-hover", on);
    e.el.setAttribute("marker-end", this._markers[e.active ? "active" : e.hover ? "hover" : "normal"]);
    if (on) e.el.parentNode.append(e.el); // drawn over the others
  }

  _paintSelection() {
    const p = this._painted.sel;
    if (p) {
      p.el.classList.remove("tb-graph-selected");
      for (const e of p.edges) this._edgeState(e, "active", false);
    }
    this._painted.sel = null;
    const u = this._cursorUnit();
    if (u < 0 || !this._unitEls[u]) return;
    const leaf = this._L.leaves[u];
    const edges = [...leaf.ins, ...leaf.outs];
    this._unitEls[u].classList.add("tb-graph-selected");
    for (const e of edges) this._edgeState(e, "active", true);
    this._painted.sel = { el: this._unitEls[u], edges };
  }

  _paintMatches() {
    for (const el of this._painted.matches) el.classList.remove("tb-graph-match", "tb-graph-match-current");
    const painted = [];
    const L = this._L;
    this._c.classList.toggle("tb-graph-searching", this._query !== "");
    for (let k = 0; k < this._matches.length; k++) {
      const i = this._model.index.get(this._matches[k]);
      if (i === undefined) continue;
      const el = this._unitEls[L.unitOfNode[i]];
      if (!el) continue;
      el.classList.add("tb-graph-match");
      if (k === 0) el.classList.add("tb-graph-match-current");
      painted.push(el);
    }
    this._painted.matches = painted;
  }

  _paintBent() {
    const L = this._L;
    const counts = new Int32Array(L.units);
    for (const name of this._bent) {
      const i = this._model.index.get(name);
      if (i !== undefined) counts[L.unitOfNode[i]] += 1;
    }
    for (let u = 0; u < L.units; u++) {
      const el = this._unitEls[u];
      if (!el) continue;
      const on = counts[u] > 0;
      const old = el.querySelector(":scope > .tb-graph-badge");
      el.classList.toggle("tb-graph-bent", on);
      if (old && (!on || old.getAttribute("data-count") !== String(counts[u]))) old.remove();
      else if (old) continue;
      if (!on) continue;
      const leaf = L.leaves[u];
      const text = leaf.kind === "box" ? `bent ${counts[u]}` : "bent";
      const w = text.length * 6 + 12;
      const badge = svg(this._doc, "g", "tb-graph-badge", {
        "data-count": String(counts[u]),
        transform: `translate(${r1(leaf.w - w + 6)},-7)`,
      });
      badge.append(
        svg(this._doc, "rect", null, { width: w, height: "14", rx: "7" }),
        svg(this._doc, "text", null, { x: "6", y: "10" }),
      );
      badge.lastChild.textContent = text;
      el.append(badge);
    }
  }

  // ------------------------------------------------------------------------ view

  /** The container's size, as last measured (reading it after drawing would force the
   * browser to lay out the whole drawing at once). */
  _size() {
    if (!this._sized) this._measure();
    return { w: this._sized.w || 800, h: this._sized.h || 600 };
  }

  _measure() {
    this._sized = { w: this._c.clientWidth, h: this._c.clientHeight };
  }

  _applyView() {
    const v = this._view;
    this._viewport.setAttribute("transform", `translate(${r1(v.x)},${r1(v.y)}) scale(${Math.round(v.s * 10000) / 10000})`);
  }

  _autoView(mode) {
    this._auto = mode;
    const b = this._L.bounds;
    const { w, h } = this._size();
    const m = FIT_MARGIN;
    if (!this._L.units) {
      this._view = { x: 0, y: 0, s: 1 };
      this._applyView();
      return;
    }
    const bw = Math.max(b.w, 1);
    const bh = Math.max(b.h, 1);
    let s = clamp(Math.min((w - 2 * m) / bw, (h - 2 * m) / bh), MIN_SCALE, 1.25);
    let y = (h - bh * s) / 2 - b.y * s;
    if (mode === "read" && s < FIT_READABLE) {
      // Too big to read even with its groups collapsed: readable, from its first row.
      const row = this._L.rows[0] || [];
      const first = row.length ? this._L.leaves[row[0]] : null;
      const last = row.length ? this._L.leaves[row[row.length - 1]] : null;
      s = FIT_READABLE;
      const cx = first ? (first.x + last.x + last.w) / 2 : b.x + bw / 2;
      this._view = { x: w / 2 - cx * s, y: m - b.y * s, s };
      this._applyView();
      return;
    }
    if (mode === "initial" && s < READABLE) {
      // Too small to read once fitted: as wide as fits (readable at least), from the top.
      s = clamp((w - 2 * m) / bw, READABLE, 1);
      y = m - b.y * s;
    }
    const x = (w - bw * s) / 2 - b.x * s;
    this._view = { x, y, s };
    this._applyView();
  }

  _zoomAt(px, py, factor) {
    const v = this._view;
    const s = clamp(v.s * factor, MIN_SCALE, MAX_SCALE);
    const k = s / v.s;
    this._view = { x: px - (px - v.x) * k, y: py - (py - v.y) * k, s };
    this._auto = null;
    this._applyView();
    this._hideTip();
  }

  _unitBox(u) {
    const leaf = this._L.leaves[u];
    return { x: leaf.x, y: leaf.y, w: leaf.w, h: NODE_H };
  }

  _centreOn(u) {
    if (u === undefined || u < 0 || u >= this._L.units) return;
    const b = this._unitBox(u);
    const { w, h } = this._size();
    const s = this._view.s < 0.6 ? 0.9 : this._view.s;
    this._view = { x: w / 2 - (b.x + b.w / 2) * s, y: h / 2 - (b.y + b.h / 2) * s, s };
    this._auto = null;
    this._applyView();
  }

  _ensureVisible(u) {
    const b = this._unitBox(u);
    const v = this._view;
    if (v.s < READABLE) {
      this._centreOn(u);
      return;
    }
    const { w, h } = this._size();
    const m = 30;
    const x0 = b.x * v.s + v.x;
    const y0 = b.y * v.s + v.y;
    const x1 = x0 + b.w * v.s;
    const y1 = y0 + b.h * v.s;
    let dx = 0;
    let dy = 0;
    if (x1 - x0 > w - 2 * m || x0 < m) dx = m - x0;
    else if (x1 > w - m) dx = w - m - x1;
    if (y1 - y0 > h - 2 * m || y0 < m) dy = m - y0;
    else if (y1 > h - m) dy = h - m - y1;
    if (dx || dy) {
      this._view = { x: v.x + dx, y: v.y + dy, s: v.s };
      this._auto = null;
      this._applyView();
    }
  }

  /** Where group `g` is drawn now (its first frame or box), in world coordinates. */
  _anchor(g) {
    const L = this._L;
    for (const c of L.containers) {
      if (c.block >= 0 && this._model.blocks[c.block].group === g) return { x: c.x, y: c.top };
    }
    for (let u = 0; u < L.units; u++) {
      const leaf = L.leaves[u];
      if (leaf.kind === "box" && this._model.blocks[leaf.block].group === g) return { x: leaf.x, y: leaf.y };
    }
    const grp = this._model.groups.get(g);
    if (grp && grp.members.length) {
      const u = L.unitOfNode[grp.members[0]];
      return { x: L.leaves[u].x, y: L.leaves[u].y };
    }
    return null;
  }

  _keepAnchor(g, before) {
    const after = this._anchor(g);
    if (this._auto === "fit") {
      this._autoView("fit");
      return;
    }
    if (!before || !after) return;
    const v = this._view;
    this._view = { x: v.x + (before.x - after.x) * v.s, y: v.y + (before.y - after.y) * v.s, s: v.s };
    this._auto = null;
    this._applyView();
  }

  // ------------------------------------------------------------------------ interaction

  _notifySelect(name) {
    if (typeof this._opt.onSelect === "function") this._opt.onSelect(name);
  }

  _notifyHover(name) {
    if (typeof this._opt.onHover === "function") this._opt.onHover(name);
  }

  _unitOfEvent(e) {
    const t = e.target;
    const el = t && typeof t.closest === "function" ? t.closest(".tb-graph-node, .tb-graph-collapsed") : null;
    if (!el || !this._gNodes.contains(el)) return -1;
    const u = Number(el.getAttribute("data-unit"));
    return Number.isInteger(u) && u >= 0 && u < this._L.units && this._unitEls[u] === el ? u : -1;
  }

  _onPointerDown(e) {
    this._justDragged = false;
    if (e.button !== 0 && e.button !== 1) return;
    if (typeof this._c.focus === "function" && this._doc.activeElement !== this._c) {
      this._c.focus({ preventScroll: true });
    }
    const onLabel = e.target && e.target.closest && e.target.closest(".tb-graph-group-label");
    if (onLabel) return;
    this._drag = { id: e.pointerId, x: e.clientX, y: e.clientY, vx: this._view.x, vy: this._view.y, moved: false };
    if (e.button === 1) e.preventDefault();
  }

  _onPointerMove(e) {
    const d = this._drag;
    if (d && d.id === e.pointerId) {
      const dx = e.clientX - d.x;
      const dy = e.clientY - d.y;
      if (!d.moved && Math.abs(dx) + Math.abs(dy) > 4) {
        d.moved = true;
        this._c.classList.add("tb-graph-panning");
        this._hideTip();
        try {
          this._svg.setPointerCapture(e.pointerId);
        } catch {
          // the pointer may be gone already
        }
      }
      if (d.moved) {
        this._view = { x: d.vx + dx, y: d.vy + dy, s: this._view.s };
        this._auto = null;
        this._applyView();
        return;
      }
    }
    if (!this._tip.hidden && this._hoverUnit >= 0) this._placeTip(e.clientX, e.clientY);
  }

  _onPointerUp(e) {
    const d = this._drag;
    if (!d || d.id !== e.pointerId) return;
    this._c.classList.remove("tb-graph-panning");
    if (d.moved) {
      this._justDragged = true;
      try {
        this._svg.releasePointerCapture(e.pointerId);
      } catch {
        // not captured
      }
    }
    this._drag = null;
  }

  _onClick(e) {
    if (this._justDragged) {
      this._justDragged = false;
      return;
    }
    const label = e.target && e.target.closest && e.target.closest(".tb-graph-group-label");
    if (label && this._gGroups.contains(label)) {
      const g = label.getAttribute("data-group");
      if (this._collapsed.has(g)) this.expand(g);
      else this.collapse(g);
      return;
    }
    const u = this._unitOfEvent(e);
    if (u < 0) return;
    const leaf = this._L.leaves[u];
    if (leaf.kind === "box") {
      this.expand(this._model.blocks[leaf.block].group);
      return;
    }
    const name = this._model.nodes[leaf.node].name;
    this._selected = name;
    this._cursorBlock = -1;
    this._paintSelection();
    this._notifySelect(name);
  }

  _onOver(e) {
    const u = this._unitOfEvent(e);
    if (u >= 0 && u !== this._hoverUnit) {
      this._hover(u);
      this._placeTip(e.clientX, e.clientY);
    }
  }

  _onOut(e) {
    const u = this._unitOfEvent(e);
    if (u < 0 || u !== this._hoverUnit) return;
    const to = e.relatedTarget;
    if (to && this._unitEls[u] && this._unitEls[u].contains(to)) return;
    this._hover(-1);
  }

  _hover(u) {
    const prev = this._painted.hover;
    if (prev) for (const e of prev) this._edgeState(e, "hover", false);
    this._painted.hover = null;
    if (u < 0) {
      const was = this._hoverUnit;
      this._hoverUnit = -1;
      this._hideTip();
      if (was !== undefined && was >= 0) this._notifyHover(null);
      return;
    }
    this._hoverUnit = u;
    const leaf = this._L.leaves[u];
    const edges = [...leaf.ins, ...leaf.outs];
    for (const e of edges) this._edgeState(e, "hover", true);
    this._painted.hover = edges;
    this._fillTip(u);
    this._notifyHover(this._unitName(u));
  }

  _fillTip(u) {
    const doc = this._doc;
    const tip = this._tip;
    const leaf = this._L.leaves[u];
    tip.replaceChildren();
    const row = (key, value, cls) => {
      const r = html(doc, "div", cls ? `tb-graph-tooltip-row ${cls}` : "tb-graph-tooltip-row");
      r.append(html(doc, "span", "tb-graph-tooltip-key", key), html(doc, "span", "tb-graph-tooltip-value", value));
      tip.append(r);
    };
    if (leaf.kind === "node") {
      const node = this._model.nodes[leaf.node];
      tip.append(html(doc, "div", "tb-graph-tooltip-name", node.name));
      row("op", node.op || "—");
      row("target", cut(node.target || "—", 200));
      row("module", node.module || "—");
      row(Array.isArray(node.shape) && node.shape.some(Array.isArray) ? "shapes" : "shape", formatShape(node.shape));
      row("dtype", formatDtype(node.dtype));
      if (!node.tensor) row("tensor", "no");
      const ins = node.inputs.map((j) => this._model.nodes[j].name);
      if (ins.length) row("inputs", cut(ins.slice(0, 6).join(", ") + (ins.length > 6 ? ` +${ins.length - 6}` : ""), 240));
      if (node.unknown.length) row("unknown", cut(node.unknown.join(", "), 200), "tb-graph-tooltip-unknown");
      if (this._bent.has(node.name)) row("bent", "yes", "tb-graph-tooltip-bent");
    } else {
      const block = this._model.blocks[leaf.block];
      tip.append(html(doc, "div", "tb-graph-tooltip-name", block.group));
      row("group", `${block.size} nodes, collapsed`);
      row("shape", formatShape(leaf.summary.shape));
      let bent = 0;
      for (const i of block.members) if (this._bent.has(this._model.nodes[i].name)) bent += 1;
      if (bent) row("bent", `${bent} node${bent === 1 ? "" : "s"}`, "tb-graph-tooltip-bent");
      tip.append(html(doc, "div", "tb-graph-tooltip-hint", "click (or Enter) to expand"));
    }
    tip.hidden = false;
  }

  _placeTip(clientX, clientY) {
    const rect = this._c.getBoundingClientRect();
    const tw = this._tip.offsetWidth;
    const th = this._tip.offsetHeight;
    let x = clientX - rect.left + 16;
    let y = clientY - rect.top + 16;
    if (x + tw > rect.width - 4) x = Math.max(4, clientX - rect.left - tw - 12);
    if (y + th > rect.height - 4) y = Math.max(4, clientY - rect.top - th - 12);
    this._tip.style.transform = `translate(${Math.round(x)}px,${Math.round(y)}px)`;
  }

  _tipAtUnit(u) {
    this._fillTip(u);
    const b = this._unitBox(u);
    const v = this._view;
    const rect = this._c.getBoundingClientRect();
    this._placeTip(rect.left + (b.x + b.w) * v.s + v.x, rect.top + (b.y + b.h) * v.s + v.y);
  }

  _hideTip() {
    if (this._tip) this._tip.hidden = true;
  }

  _onWheel(e) {
    if (!this._L.units) return;
    e.preventDefault();
    let dy = e.deltaY;
    if (e.deltaMode === 1) dy *= 16;
    else if (e.deltaMode === 2) dy *= 400;
    dy = clamp(dy, -300, 300);
    const rect = this._svg.getBoundingClientRect();
    this._zoomAt(e.clientX - rect.left, e.clientY - rect.top, Math.exp(-dy * 0.0015));
  }

  _onKey(e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.target !== this._c) return;
    switch (e.key) {
      case "ArrowUp":
        this._move("up");
        break;
      case "ArrowDown":
        this._move("down");
        break;
      case "ArrowLeft":
        this._move("left");
        break;
      case "ArrowRight":
        this._move("right");
        break;
      case "Enter":
      case " ":
        this._activate();
        break;
      case "+":
      case "=":
        this.zoomIn();
        break;
      case "-":
      case "_":
        this.zoomOut();
        break;
      case "0":
        this.fit();
        break;
      case "c":
      case "C":
        this._collapseAtCursor();
        break;
      case "Escape":
        this._hideTip();
        if (this._query) this.search("");
        break;
      default:
        return;
    }
    e.preventDefault();
  }

  _setCursor(u) {
    const leaf = this._L.leaves[u];
    if (leaf.kind === "node") {
      this._selected = this._model.nodes[leaf.node].name;
      this._cursorBlock = -1;
    } else {
      this._selected = null;
      this._cursorBlock = leaf.block;
    }
    this._paintSelection();
    this._ensureVisible(u);
    this._tipAtUnit(u);
    this._announce(u);
  }

  _announce(u) {
    const leaf = this._L.leaves[u];
    if (leaf.kind === "node") {
      const node = this._model.nodes[leaf.node];
      this._live.textContent = `${node.name}, ${node.line2}, shape ${formatShape(node.shape)}${this._bent.has(node.name) ? ", bent" : ""}`;
    } else {
      const block = this._model.blocks[leaf.block];
      this._live.textContent = `group ${block.group}, ${block.size} nodes, collapsed; Enter expands it`;
    }
  }

  _move(dir) {
    const L = this._L;
    if (!L.units) return;
    const cur = this._cursorUnit();
    if (cur < 0) {
      this._setCursor(L.rows[0] && L.rows[0].length ? L.rows[0][0] : 0);
      return;
    }
    const leaf = L.leaves[cur];
    const cx = leaf.x + leaf.w / 2;
    let next = -1;
    if (dir === "up" || dir === "down") {
      const list = dir === "up" ? leaf.ins.map((e) => e.from) : leaf.outs.map((e) => e.to);
      let best = Infinity;
      for (const v of list) {
        const o = L.leaves[v];
        const dist = Math.abs(o.x + o.w / 2 - cx);
        if (dist < best) {
          best = dist;
          next = v;
        }
      }
    } else {
      const row = L.rows[leaf.layer];
      const k = L.rowIndex[cur] + (dir === "left" ? -1 : 1);
      if (k >= 0 && k < row.length) next = row[k];
    }
    if (next >= 0) this._setCursor(next);
  }

  _activate() {
    const u = this._cursorUnit();
    if (u < 0) {
      this._move("down");
      return;
    }
    const leaf = this._L.leaves[u];
    if (leaf.kind === "box") {
      const block = this._model.blocks[leaf.block];
      this._cursorBlock = -1;
      this.expand(block.group);
      const first = this._L.unitOfNode[block.members[0]];
      this._setCursor(first);
      return;
    }
    const name = this._model.nodes[leaf.node].name;
    this._paintSelection();
    this._notifySelect(name);
  }

  _collapseAtCursor() {
    const u = this._cursorUnit();
    if (u < 0) return;
    const leaf = this._L.leaves[u];
    const c = leaf.container;
    if (!c || c.block < 0) return;
    const block = this._model.blocks[c.block];
    this.collapse(block.group);
    const box = this._L.unitOfBlock.get(block.id);
    if (box !== undefined) this._setCursor(box);
  }

  _findMatches(q) {
    let test;
    const m = /^\/(.+)\/([a-z]*)$/s.exec(q);
    if (m) {
      try {
        const re = new RegExp(m[1], m[2].replace(/[gy]/g, ""));
        test = (s) => re.test(s);
      } catch {
        return null;
      }
    } else {
      const low = q.toLowerCase();
      test = (s) => s.toLowerCase().includes(low);
    }
    const out = [];
    for (const node of this._model.nodes) {
      if (test(node.name) || test(node.target) || test(node.module)) out.push(node.name);
    }
    return out;
  }
}
