// torchbend studio: the page. Plain ES module, no framework, nothing from the internet.
// Everything goes through the studio server's API (see the server's contract).

// ---------------------------------------------------------------- basics

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

const TOKEN = new URLSearchParams(location.search).get("token") || "";
// The sweep's atlas, in its frame, loads its renders by plain relative paths: the cookie
// carries the token there (SameSite=Strict: never on a request another site makes).
if (TOKEN) document.cookie = `torchbend_token=${encodeURIComponent(TOKEN)}; path=/; SameSite=Strict`;

/** `url` with `?token=` (or `&token=`) added when the page has a token. */
function withToken(url) {
  if (!TOKEN) return url;
  return url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(TOKEN);
}

const enc = encodeURIComponent;

class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

/** JSON written as it is into a request body: a float literal for Python (JSON.stringify
 * writes 2.0 as "2", an int there), or JSON text the user typed (keeping its 2.0). */
class Raw {
  constructor(text) {
    this.text = text;
  }
  toJSON() {
    RAW_TEXTS.push(this.text);
    return `${RAW_MARK}${RAW_TEXTS.length - 1}${RAW_MARK}`;
  }
}
const RAW_TEXTS = [];
const RAW_MARK = `@@raw${Math.random().toString(36).slice(2)}@@`; // letters, digits and @ only
const RAW_FIND = new RegExp(`"${RAW_MARK}(\\d+)${RAW_MARK}"`, "g");

/** A number sent as a float literal. */
function float(x) {
  const t = String(x);
  return new Raw(/^-?\d+$/.test(t) ? `${t}.0` : t);
}

/** JSON text of `value`, with each Raw written as its text. */
function jsonText(value, indent) {
  RAW_TEXTS.length = 0;
  const text = JSON.stringify(value, null, indent).replace(RAW_FIND, (_, i) => RAW_TEXTS[Number(i)]);
  RAW_TEXTS.length = 0;
  return text;
}

/** A JSON.parse reviver keeping float literals of whole values (1.0) floats for jsonText, where
 * the browser gives the source text. */
function keepFloats(key, value, context) {
  if (typeof value === "number" && Number.isInteger(value) && context && typeof context.source === "string" && /[.eE]/.test(context.source)) {
    return new Raw(context.source);
  }
  return value;
}

/** Call the studio API; resolve to the JSON answer, reject with an ApiError carrying `error`. */
async function api(path, { method = "GET", body, headers = {}, as = "json" } = {}) {
  const h = { ...headers };
  if (TOKEN) h["X-Torchbend-Token"] = TOKEN;
  let payload;
  if (body !== undefined) {
    if (body instanceof Blob || body instanceof ArrayBuffer) {
      payload = body;
      if (!h["Content-Type"]) h["Content-Type"] = "application/octet-stream";
    } else {
      payload = jsonText(body);
      h["Content-Type"] = "application/json";
    }
  }
  let res;
  try {
    res = await fetch(path, { method, headers: h, body: payload });
  } catch (e) {
    throw new ApiError(`cannot reach the studio server (${method} ${path}): ${e.message || e}; is it still running?`, 0);
  }
  let text = "";
  try {
    text = await res.text();
  } catch (e) {
    throw new ApiError(`${method} ${path}: the answer was cut off (${e.message || e})`, res.status);
  }
  if (res.ok && as === "text") return text;
  let data = null;
  let parsed = false;
  if (text) {
    try {
      data = JSON.parse(text);
      parsed = true;
    } catch {
      parsed = false;
    }
  }
  if (!res.ok) {
    if (parsed && data && typeof data.error === "string") throw new ApiError(data.error, res.status);
    const detail = text && !parsed ? `: ${text.slice(0, 300)}` : "";
    throw new ApiError(`${method} ${path} failed with status ${res.status} ${res.statusText}${detail}`, res.status);
  }
  if (text && !parsed) throw new ApiError(`${method} ${path}: the answer is not JSON`, res.status);
  return data;
}

/** Create an element: el("div", {class: "x", onclick: f}, child, "text", ...). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else if (k in node && typeof v !== "string") node[k] = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/** Compact number: 0.1235, 123.5, 1.23e-5, 4.5e+6. */
function fmtNum(x) {
  if (x === null || x === undefined) return "—";
  if (typeof x !== "number") return String(x);
  if (!Number.isFinite(x)) return String(x);
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (Number.isInteger(x) && a < 1e6) return String(x);
  if (a >= 1e5 || a < 1e-3) return x.toExponential(2).replace("e+", "e");
  return String(Number(x.toPrecision(4)));
}

function fmtShape(s) {
  if (s === null || s === undefined) return "—";
  if (!Array.isArray(s)) return String(s);
  if (s.length && Array.isArray(s[0])) return "(" + s.map(fmtShape).join(", ") + ")";
  return s.length ? s.join("×") : "scalar";
}

function fmtBytes(n) {
  if (!Number.isFinite(n)) return "?";
  if (n >= 1 << 30) return `${fmtNum(n / (1 << 30))} GB`;
  if (n >= 1 << 20) return `${fmtNum(n / (1 << 20))} MB`;
  if (n >= 1 << 10) return `${fmtNum(n / (1 << 10))} kB`;
  return `${n} B`;
}

function fmtValue(v) {
  if (v && typeof v === "object" && !Array.isArray(v) && typeof v.control === "string") {
    const extra = [];
    if (v.scale !== undefined && v.scale !== 1) extra.push(`×${fmtNum(v.scale)}`);
    if (v.offset !== undefined && v.offset !== 0) extra.push(`+${fmtNum(v.offset)}`);
    return `⟨${v.control}${extra.join("")}⟩`;
  }
  if (v && typeof v === "object" && v.tensor && Array.isArray(v.tensor.shape)) {
    return `${v.tensor.dtype}[${v.tensor.shape.join("×")}]`; // a Steer's vector: its numbers are in the JSON
  }
  if (typeof v === "number") return fmtNum(v);
  return JSON.stringify(v);
}

function debounce(fn, ms) {
  let t = null;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
}

function decodeBase64(s) {
  const bin = atob(s || "");
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** The pattern that matches `name` and nothing else: escaped (a weight's dots are no wildcards)
 * and anchored at both ends, as Python's aliases write it (`^encoder\.0\.weight$`). */
function exactPattern(name) {
  return "^" + name.replace(/[.\\^$*+?()[\]{}|]/g, "\\$&") + "$";
}

// ---------------------------------------------------------------- colour maps

function makeLut(stops) {
  const lut = new Uint8ClampedArray(256 * 3);
  const cols = stops.map((h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)));
  const n = cols.length - 1;
  for (let i = 0; i < 256; i++) {
    const t = (i / 255) * n;
    const k = Math.min(n - 1, Math.floor(t));
    const f = t - k;
    for (let c = 0; c < 3; c++) lut[i * 3 + c] = Math.round(cols[k][c] * (1 - f) + cols[k + 1][c] * f);
  }
  return lut;
}

// Perceptual dark-to-bright ramps (approximate anchor colours of magma and viridis).
const MAGMA = makeLut(["#000004", "#1c1044", "#4f127b", "#812581", "#b5367a", "#e55064", "#fb8761", "#fec287", "#fcfdbf"]);
const VIRIDIS = makeLut(["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#fde725"]);

/** An offscreen canvas holding a rows x cols uint8 grid through a colour map. */
function gridImage(data, rows, cols, lut, flipRows) {
  const off = document.createElement("canvas");
  off.width = Math.max(1, cols);
  off.height = Math.max(1, rows);
  const ctx = off.getContext("2d");
  const img = ctx.createImageData(off.width, off.height);
  for (let r = 0; r < rows; r++) {
    const y = flipRows ? rows - 1 - r : r;
    for (let c = 0; c < cols; c++) {
      const v = data[r * cols + c] ?? 0;
      const o = (y * cols + c) * 4;
      img.data[o] = lut[v * 3];
      img.data[o + 1] = lut[v * 3 + 1];
      img.data[o + 2] = lut[v * 3 + 2];
      img.data[o + 3] = 255;
    }
  }
  ctx.putImageData(img, 0, 0);
  return off;
}

/** Size a canvas's backing store to its displayed size; returns its context and size. */
function fitCanvas(canvas) {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(canvas.clientWidth * dpr));
  const h = Math.max(1, Math.round(canvas.clientHeight * dpr));
  if (canvas.width !== w) canvas.width = w;
  if (canvas.height !== h) canvas.height = h;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  return { ctx, w, h, dpr };
}

// ---------------------------------------------------------------- page state

const S = {
  model: null,
  method: null,
  graph: null,
  nodes: new Map(), // name -> node of the graph
  callbacks: [],
  state: null,
  sounds: null,
  render: null,
  selected: null, // {kind: "activation"|"weight", name}
  view: null,
  tab: "bend",
  sweepLoaded: false,
};

// ---------------------------------------------------------------- status and errors

const statusEl = $("#status");
const errorBox = $("#error-box");
const errorEl = $("#error");

function setStatus(text) {
  statusEl.textContent = text || "";
}

function showError(err) {
  const msg = typeof err === "string" ? err : err && err.message ? err.message : String(err);
  errorEl.textContent = msg;
  errorBox.classList.add("on");
  $("#error-close").hidden = false;
  setStatus("");
}

function clearError() {
  errorEl.textContent = "";
  errorBox.classList.remove("on");
  $("#error-close").hidden = true;
}

$("#error-close").addEventListener("click", clearError);

/** Run a user action: clear the last error, disable `buttons` meanwhile, show what fails. */
async function action(fn, { buttons = [], keepError = false } = {}) {
  if (!keepError) clearError();
  const list = (Array.isArray(buttons) ? buttons : [buttons]).filter(Boolean);
  const was = list.map((b) => b.disabled);
  list.forEach((b) => (b.disabled = true));
  try {
    return await fn();
  } catch (e) {
    showError(e);
    return undefined;
  } finally {
    list.forEach((b, i) => (b.disabled = was[i]));
  }
}

// Safety net: nothing the page does may end as an unhandled rejection or an uncaught error.
window.addEventListener("unhandledrejection", (e) => {
  e.preventDefault();
  showError(e.reason && e.reason.message ? e.reason.message : String(e.reason));
});

function isTextField(t) {
  if (!t || !(t instanceof Element)) return false;
  if (t.isContentEditable) return true;
  if (t.tagName === "TEXTAREA") return true;
  if (t.tagName !== "INPUT") return false;
  return ["text", "search", "number", "email", "password", "url", "tel", ""].includes(t.type);
}

/** Whether a key typed on `t` belongs to it (text entry, a select's type-ahead). */
function isTyping(t) {
  return isTextField(t) || (t instanceof Element && t.tagName === "SELECT");
}

/** Whether Space activates `t` natively. */
function takesSpace(t) {
  if (!(t instanceof Element)) return false;
  if (isTyping(t)) return true;
  if (["BUTTON", "A", "SUMMARY", "AUDIO", "VIDEO", "IFRAME"].includes(t.tagName)) return true;
  if (t.tagName === "INPUT" && ["checkbox", "radio", "button", "submit", "reset", "file", "color"].includes(t.type)) return true;
  return t.getAttribute("role") === "tab" || t.getAttribute("role") === "button";
}

// ---------------------------------------------------------------- the graph view

/** A plain list standing in for the graph when graph.js cannot be loaded. */
class ListView {
  constructor(container, { onSelect = () => {}, onHover = () => {} } = {}) {
    this.container = container;
    this.onSelect = onSelect;
    this.onHover = onHover;
    this.names = [];
    this.sel = null;
    this.bent = new Set();
    this.list = el("ul", { class: "fallback-graph", "aria-label": "nodes" });
    container.replaceChildren(this.list);
  }
  setGraph(graph) {
    this.names = (graph.nodes || []).map((n) => n.name);
    this.list.replaceChildren(
      ...this.names.map((name) =>
        el("li", {}, el("button", {
          type: "button", text: name, dataset: { node: name },
          onclick: () => { this.select(name); this.onSelect(name); },
          onmouseenter: () => this.onHover(name), onmouseleave: () => this.onHover(null),
        })),
      ),
    );
    this._mark();
  }
  _mark() {
    for (const b of $$("button", this.list)) {
      b.classList.toggle("sel", b.dataset.node === this.sel);
      b.classList.toggle("bent", this.bent.has(b.dataset.node));
    }
  }
  search(q) {
    q = (q || "").trim().toLowerCase();
    const hits = q ? this.names.filter((n) => n.toLowerCase().includes(q)) : [];
    for (const b of $$("button", this.list)) b.classList.toggle("match", hits.includes(b.dataset.node));
    return hits;
  }
  select(name) { this.sel = name; this._mark(); const b = $$("button", this.list).find((x) => x.dataset.node === name); if (b) b.scrollIntoView({ block: "nearest" }); }
  selected() { return this.sel; }
  setBent(names) { this.bent = new Set(names); this._mark(); }
  zoomIn() {}
  zoomOut() {}
  fit() {}
  collapse() {}
  expand() {}
  collapsed() { return []; }
}

let selecting = false;

function viewCall(method, ...args) {
  if (!S.view || typeof S.view[method] !== "function") return undefined;
  try {
    return S.view[method](...args);
  } catch (e) {
    showError(`the graph view failed (${method}): ${e.message || e}`);
    return undefined;
  }
}

async function createView() {
  const container = $("#graph");
  const callbacks = {
    onSelect: (name) => {
      if (selecting || !name) return;
      selectNode(name, { fromGraph: true });
    },
    onHover: (name) => showHover(name),
  };
  try {
    const mod = await import("./graph.js");
    if (typeof mod.GraphView !== "function") throw new Error("graph.js exports no GraphView");
    S.view = new mod.GraphView(container, callbacks);
  } catch (e) {
    S.view = new ListView(container, callbacks);
    showError(`the graph diagram could not be loaded (${e.message || e}); nodes are listed instead`);
  }
}

function showHover(name) {
  const out = $("#hover-info");
  if (!name) {
    out.textContent = "";
    return;
  }
  const n = S.nodes.get(name);
  out.textContent = n ? `${name} · ${n.op}${n.target ? " " + n.target : ""} · ${fmtShape(n.shape)}` : name;
}

// ---------------------------------------------------------------- model, method, graph

async function loadModel() {
  const m = await api("/api/model");
  S.model = m;
  S.method = m.fn;
  $("#model-name").textContent = m.model || "(model)";
  $("#model-class").textContent = m.class ? `${m.class}` : "";
  // A model that names its latent channels (model.latent_names) shows them: they say what
  // bending each channel of its latent moves.
  const latent = $("#model-latent");
  const names = Array.isArray(m.latent_names) ? m.latent_names : [];
  latent.hidden = !names.length;
  latent.textContent = names.length ? `latent: ${names.map((n, i) => `${i} ${n}`).join(" · ")}` : "";
  latent.title = names.length ? "the model's latent channels, in order (model.latent_names)" : "";
  const sel = $("#method");
  const methods = m.methods && m.methods.length ? m.methods : [m.fn];
  sel.replaceChildren(...methods.map((f) => el("option", { value: f, text: f })));
  sel.value = m.fn;
  sel.disabled = methods.length < 2;
  if (m.sweep) {
    $("#tab-sweep").hidden = false;
  }
  document.title = `${m.model || "model"} · torchbend studio`;
}

async function loadGraph() {
  const g = await api(`/api/graph?fn=${enc(S.method)}`);
  S.graph = g;
  S.nodes = new Map((g.nodes || []).map((n) => [n.name, n]));
  viewCall("setGraph", g);
  renderFlow(g);
  updateBentMarks();
  $("#search-count").textContent = `${S.nodes.size} nodes`;
}

$("#method").addEventListener("change", (e) => {
  S.method = e.target.value;
  action(async () => {
    setStatus(`loading ${S.method}…`);
    S.selected = null;
    await loadGraph();
    tables.activations.stale = true;
    if (S.tab === "activations") await loadTable("activations");
    setStatus(`method ${S.method}: ${S.nodes.size} nodes`);
  });
});

// ---------------------------------------------------------------- search

const searchEl = $("#search");

function runSearch() {
  const q = searchEl.value.trim();
  const hits = viewCall("search", q) || [];
  $("#search-count").textContent = q ? `${hits.length} match${hits.length === 1 ? "" : "es"}` : `${S.nodes.size} nodes`;
  return hits;
}

const runSearchSoon = debounce(runSearch, 60);
searchEl.addEventListener("input", runSearchSoon);
searchEl.addEventListener("keydown", (e) => {
  if (e.key === "Enter") {
    e.preventDefault(); // no keypress: the focus moves, and Enter must not attach
    const hits = runSearch();
    if (!hits.length) {
      setStatus(searchEl.value.trim() ? `no node matches “${searchEl.value.trim()}”` : "");
      return;
    }
    selectNode(hits[0], { focusTarget: true });
  } else if (e.key === "Escape") {
    if (searchEl.value) {
      e.preventDefault();
      searchEl.value = "";
      runSearch();
    }
  }
});

$("#zoom-in").addEventListener("click", () => viewCall("zoomIn"));
$("#zoom-out").addEventListener("click", () => viewCall("zoomOut"));
$("#zoom-fit").addEventListener("click", () => viewCall("fit"));

// ---------------------------------------------------------------- selection

const targetEl = $("#target");

function selectNode(name, { fromGraph = false, focusTarget = false } = {}) {
  S.selected = { kind: "activation", name };
  if (!fromGraph) {
    selecting = true;
    try {
      viewCall("select", name);
    } finally {
      selecting = false;
    }
  }
  targetEl.value = exactPattern(name);
  targetEl.dataset.kind = "activation";
  targetEl.dataset.name = name;
  markSelectedRows();
  const n = S.nodes.get(name);
  setStatus(`selected ${name}${n ? ` (${n.op}, ${fmtShape(n.shape)})` : ""}`);
  if (focusTarget) {
    setTab("bend");
    targetEl.focus();
  }
  loadStats("activation", name);
}

function selectWeight(name) {
  S.selected = { kind: "weight", name };
  targetEl.value = exactPattern(name);
  targetEl.dataset.kind = "weight";
  targetEl.dataset.name = name;
  markSelectedRows();
  setStatus(`selected weight ${name}: statistics in Node, target set in Bend`);
  loadStats("weight", name);
}

// ---------------------------------------------------------------- node statistics

let statsSeq = 0;

async function loadStats(kind, name) {
  const seq = ++statsSeq;
  const info = $("#node-info");
  const node = kind === "activation" ? S.nodes.get(name) : null;
  info.replaceChildren(el("p", { class: "muted", text: `loading ${name}…` }));
  info.dataset.name = name;
  info.dataset.kind = kind;
  delete info.dataset.loaded;
  clearPicture();
  if (node && node.tensor === false) {
    renderNodeInfo(kind, name, node, null, "not a tensor: no statistics");
    return;
  }
  const url = kind === "weight"
    ? `/api/stats/weight?name=${enc(name)}`
    : `/api/stats/activation?name=${enc(name)}&fn=${enc(S.method)}`;
  try {
    const st = await api(url);
    if (seq !== statsSeq) return;
    renderNodeInfo(kind, name, node, st, null);
    S.stats = st;
    drawPicture(st.picture);
    info.dataset.loaded = "1";
  } catch (e) {
    if (seq !== statsSeq) return;
    renderNodeInfo(kind, name, node, null, e.message);
    showError(e);
  }
}

function renderNodeInfo(kind, name, node, st, problem) {
  const rows = [["name", name], ["kind", kind]];
  if (node) {
    rows.push(["op", node.op]);
    if (node.target) rows.push(["target", node.target]);
    if (node.module) rows.push(["module", node.module]);
    if (node.inputs && node.inputs.length) rows.push(["inputs", node.inputs.join(", ")]);
    if (!st) rows.push(["shape", fmtShape(node.shape)], ["dtype", node.dtype || "—"]);
  }
  if (st) {
    rows.push(["shape", fmtShape(st.shape)]);
    for (const k of ["mean", "std", "min", "max"]) rows.push([k, fmtNum(st[k])]);
    if (st.sound) rows.push(["sound", st.sound]);
    if (st.health) rows.push(...healthRows(st.health));
  }
  const dl = el("dl", { class: "stats" });
  for (const [k, v] of rows) dl.append(el("dt", { text: k }), el("dd", { text: String(v), dataset: { stat: k } }));
  const children = [dl];
  if (kind === "activation" && st && st.shape && st.shape.length >= 2) {
    children.push(auditionControls(name, st.shape));
  }
  if (problem) children.push(el("p", { class: "field-error", text: problem }));
  $("#node-info").replaceChildren(...children);
}

// ---------------------------------------------------------------- audition

// A channel of the node soloed or bypassed in a render of the current sound, or the node's
// activation over time as a sound (tb.discover.audition): played by the panel's own player.
function auditionControls(name, shape) {
  const channels = shape[1];
  const channel = el("input", {
    id: "audition-channel", type: "number", min: 0, max: channels - 1, step: 1, value: "0",
    class: "audition-channel", "aria-label": `channel to audition, 0 to ${channels - 1}; empty: every channel`,
  });
  const button = (mode, text, title) =>
    el("button", { type: "button", class: "audition", dataset: { mode }, title, text, onclick: () => audition(name, mode) });
  const player = el("audio", { id: "audition-player", controls: true, preload: "none" });
  player.addEventListener("error", () => {
    if (!player.getAttribute("src")) return;
    // The element cannot read the studio's answer: ask it again for its message.
    api(player.dataset.url).then(() => showError("cannot play the audition"), showError);
  });
  return el(
    "div", { class: "audition-box", id: "audition" },
    el("label", { for: "audition-channel", class: "muted", text: `channel (of ${channels})` }), channel,
    button("solo", "Solo", "render the current sound with only this channel of the node"),
    button("bypass", "Bypass", "render the current sound with this channel of the node zeroed"),
    button("activation", "Hear activation", "the node's activation over time (this channel) as a sound"),
    player,
  );
}

function audition(name, mode) {
  const text = $("#audition-channel").value.trim();
  if (text !== "" && !/^-?\d+$/.test(text)) {
    showError(`the channel is a whole number (or empty, for every channel), got “${text}”`);
    return;
  }
  const channel = text === "" ? "" : `&channel=${enc(text)}`;
  const url = mode === "activation"
    ? `/api/audition/activation?name=${enc(name)}&fn=${enc(S.method)}${channel}`
    : `/api/audition?name=${enc(name)}&mode=${mode}${channel}`;
  const player = $("#audition-player");
  player.dataset.url = url;
  player.dataset.mode = mode;
  player.src = withToken(url);
  const what = text === "" ? "every channel" : `channel ${text}`;
  setStatus(mode === "activation" ? `playing ${name}, ${what}` : `rendering with ${name} ${what} ${mode === "solo" ? "soloed" : "bypassed"}…`);
  const p = player.play();
  if (p && typeof p.catch === "function") {
    p.catch((e) => {
      if (e && e.name === "AbortError") return; // a new source replaced this one
      if (e && e.name === "NotSupportedError") return; // the error event says why
      showError(`cannot play the audition: ${e.message || e}`);
    });
  }
}

// The node's health: the bent run against the unbent one (tb.discover.health).
function healthRows(h) {
  const a = h.unbent, b = h.bended;
  if (!a || !b) return [];
  const dead = (d) => (d === null || d === undefined ? "—" : d.toFixed(2));
  return [
    ["growth", h.growth],
    ["dead (unbent → bent)", `${dead(a.dead)} → ${dead(b.dead)}`],
    ["NaN/Inf (bent)", `${b.nans}/${b.infs}`],
    ["health", h.problem || "ok"],
  ];
}

function clearPicture() {
  const canvas = $("#node-picture");
  const { ctx, w, h } = fitCanvas(canvas);
  ctx.clearRect(0, 0, w, h);
  delete canvas.dataset.rows;
  S.picture = null;
}

function drawPicture(pic) {
  S.picture = pic || null;
  const canvas = $("#node-picture");
  if (!pic || !canvas.clientWidth) return;
  const { ctx, w, h, dpr } = fitCanvas(canvas);
  ctx.clearRect(0, 0, w, h);
  const data = decodeBase64(pic.data);
  const rows = pic.rows | 0;
  const cols = pic.cols | 0;
  canvas.dataset.rows = String(rows);
  canvas.dataset.cols = String(cols);
  if (!rows || !cols) return;
  const L = 46 * dpr, R = 76 * dpr, T = 8 * dpr, B = 30 * dpr;
  const pw = Math.max(1, w - L - R), ph = Math.max(1, h - T - B);
  const img = gridImage(data, rows, cols, VIRIDIS, false);
  ctx.imageSmoothingEnabled = rows * 2 > ph || cols * 2 > pw;
  ctx.drawImage(img, L, T, pw, ph);
  // axes
  ctx.strokeStyle = "#5b616b";
  ctx.lineWidth = dpr;
  ctx.strokeRect(L - 0.5, T - 0.5, pw + 1, ph + 1);
  ctx.fillStyle = "#c8ccd3";
  ctx.font = `${11 * dpr}px system-ui, sans-serif`;
  ctx.textBaseline = "top";
  ctx.textAlign = "left";
  ctx.fillText("0", L, T + ph + 3 * dpr);
  ctx.textAlign = "right";
  ctx.fillText(String(cols), L + pw, T + ph + 3 * dpr);
  ctx.textAlign = "center";
  ctx.fillText(`${pic.x || "time"} →`, L + pw / 2, T + ph + 15 * dpr);
  ctx.textAlign = "right";
  ctx.textBaseline = "top";
  ctx.fillText("0", L - 4 * dpr, T);
  ctx.textBaseline = "bottom";
  ctx.fillText(String(rows), L - 4 * dpr, T + ph);
  ctx.save();
  ctx.translate(14 * dpr, T + ph / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  ctx.fillText(`${pic.y || "channels"} ↓`, 0, 0);
  ctx.restore();
  // colour bar
  const bx = L + pw + 10 * dpr, bw = 10 * dpr;
  for (let i = 0; i < ph; i++) {
    const v = Math.round(255 * (1 - i / Math.max(1, ph - 1)));
    ctx.fillStyle = `rgb(${VIRIDIS[v * 3]},${VIRIDIS[v * 3 + 1]},${VIRIDIS[v * 3 + 2]})`;
    ctx.fillRect(bx, T + i, bw, 1);
  }
  ctx.fillStyle = "#c8ccd3";
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  ctx.fillText(fmtNum(pic.high), bx + bw + 3 * dpr, T);
  ctx.textBaseline = "bottom";
  ctx.fillText(fmtNum(pic.low), bx + bw + 3 * dpr, T + ph);
}

// ---------------------------------------------------------------- tabs

const tabButtons = $$('#tabs [role="tab"]');

function setTab(name, focus = false) {
  S.tab = name;
  for (const b of tabButtons) {
    const on = b.dataset.tab === name;
    b.setAttribute("aria-selected", on ? "true" : "false");
    b.tabIndex = on ? 0 : -1;
    $("#" + b.getAttribute("aria-controls")).hidden = !on;
    if (on && focus) b.focus();
  }
  if ((name === "weights" || name === "activations") && tables[name].stale) loadTable(name);
  if (name === "node" && S.picture) drawPicture(S.picture);
  if (name === "sweep" && !S.sweepLoaded && S.model && S.model.sweep) {
    $("#sweep").src = withToken(S.model.sweep);
    S.sweepLoaded = true;
  }
}

for (const b of tabButtons) b.addEventListener("click", () => setTab(b.dataset.tab));
$("#tabs").addEventListener("keydown", (e) => {
  const visible = tabButtons.filter((b) => !b.hidden);
  const i = visible.indexOf(document.activeElement);
  if (i < 0) return;
  let j = null;
  if (e.key === "ArrowRight") j = (i + 1) % visible.length;
  else if (e.key === "ArrowLeft") j = (i - 1 + visible.length) % visible.length;
  else if (e.key === "Home") j = 0;
  else if (e.key === "End") j = visible.length - 1;
  if (j === null) return;
  e.preventDefault();
  setTab(visible[j].dataset.tab, true);
});

// ---------------------------------------------------------------- weights and activations tables

const tables = {
  weights: {
    url: (p) => `/api/weights${p ? `?pattern=${enc(p)}` : ""}`,
    cells: (r) => [r.name, fmtShape(r.shape), fmtNum(r.mean), fmtNum(r.std), fmtNum(r.min), fmtNum(r.max)],
    activate: (name) => selectWeight(name),
    stale: true,
    seq: 0,
    rows: [],
  },
  activations: {
    url: (p) => `/api/activations?fn=${enc(S.method)}${p ? `&pattern=${enc(p)}` : ""}`,
    cells: (r) => [r.name, r.op, r.target ?? "", fmtShape(r.shape), r.dtype || (r.tensor === false ? "not a tensor" : "—")],
    activate: (name) => selectNode(name),
    stale: true,
    seq: 0,
    rows: [],
  },
};
const MAX_ROWS = 2000;

async function loadTable(kind) {
  const t = tables[kind];
  const seq = ++t.seq;
  const pattern = $(`#${kind}-filter`).value;
  const errEl = $(`#${kind}-error`);
  t.stale = false;
  try {
    const data = await api(t.url(pattern));
    if (seq !== t.seq) return;
    errEl.textContent = "";
    t.rows = data.rows || [];
    renderTable(kind);
  } catch (e) {
    if (seq !== t.seq) return;
    errEl.textContent = e.message;
    if (e.status !== 400) showError(e);
  }
}

function renderTable(kind) {
  const t = tables[kind];
  const table = $(`#${kind}-table`);
  const tbody = table.tBodies[0];
  const focused = document.activeElement && tbody.contains(document.activeElement) ? document.activeElement.dataset.name : null;
  const shown = t.rows.slice(0, MAX_ROWS);
  const sel = S.selected && S.selected.kind === (kind === "weights" ? "weight" : "activation") ? S.selected.name : null;
  tbody.replaceChildren(
    ...shown.map((r) => {
      const tr = el("tr", { tabindex: "-1", dataset: { name: r.name } }, ...t.cells(r).map((c) => el("td", { text: c })));
      if (r.bent) {
        tr.classList.add("bent");
        tr.dataset.bent = "1";
      }
      if (r.name === sel) {
        tr.classList.add("selected");
        tr.setAttribute("aria-selected", "true");
      }
      return tr;
    }),
  );
  const rows = Array.from(tbody.rows);
  const rover = rows.find((r) => r.dataset.name === (focused || sel)) || rows[0];
  if (rover) rover.tabIndex = 0;
  if (focused && rover && rover.dataset.name === focused) rover.focus();
  const n = t.rows.length;
  $(`#${kind}-count`).textContent = n > MAX_ROWS ? `${MAX_ROWS} of ${n} shown` : `${n} row${n === 1 ? "" : "s"}`;
}

function markSelectedRows() {
  for (const kind of ["weights", "activations"]) {
    const want = S.selected && S.selected.kind === (kind === "weights" ? "weight" : "activation") ? S.selected.name : null;
    for (const tr of $(`#${kind}-table`).tBodies[0].rows) {
      const on = tr.dataset.name === want;
      tr.classList.toggle("selected", on);
      if (on) tr.setAttribute("aria-selected", "true");
      else tr.removeAttribute("aria-selected");
    }
  }
}

/** Rows of `tbody` a click or Enter picks (`pick(tr)`); ↑ ↓, Page Up, Page Down, Home and End
 * move between them, one of them in the tab order. */
function rowsPick(tbody, pick) {
  const activateRow = (tr) => {
    if (!tr || !tr.dataset.name) return;
    for (const r of tbody.rows) r.tabIndex = -1;
    tr.tabIndex = 0;
    pick(tr);
  };
  tbody.addEventListener("click", (e) => activateRow(e.target.closest("tr")));
  tbody.addEventListener("keydown", (e) => {
    const tr = e.target.closest("tr");
    if (!tr) return;
    const rows = Array.from(tbody.rows);
    const i = rows.indexOf(tr);
    let j = null;
    if (e.key === "Enter") {
      e.preventDefault();
      activateRow(tr);
      return;
    }
    if (e.key === "ArrowDown") j = Math.min(rows.length - 1, i + 1);
    else if (e.key === "ArrowUp") j = Math.max(0, i - 1);
    else if (e.key === "Home") j = 0;
    else if (e.key === "End") j = rows.length - 1;
    else if (e.key === "PageDown") j = Math.min(rows.length - 1, i + 15);
    else if (e.key === "PageUp") j = Math.max(0, i - 15);
    if (j === null) return;
    e.preventDefault();
    tr.tabIndex = -1;
    rows[j].tabIndex = 0;
    rows[j].focus();
  });
}

for (const kind of ["weights", "activations"]) {
  const input = $(`#${kind}-filter`);
  const reload = debounce(() => loadTable(kind), 250);
  input.addEventListener("input", reload);
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      loadTable(kind);
    }
  });
  rowsPick($(`#${kind}-table`).tBodies[0], (tr) => {
    clearError();
    tables[kind].activate(tr.dataset.name);
  });
}

// ---------------------------------------------------------------- flow

function renderFlow(g) {
  const steps = g.flow_steps || [];
  const list = $("#flow-steps");
  if (!steps.length) {
    list.replaceChildren(el("li", { class: "muted", text: "no flow steps: the traced method has no branches, loops or values read from tensors" }));
  } else {
    list.replaceChildren(
      ...steps.map((s, i) => {
        const value = s.value === undefined ? "" : typeof s.value === "string" ? s.value : JSON.stringify(s.value);
        const b = el(
          "button",
          {
            type: "button",
            class: "flow-step",
            dataset: { node: s.name ?? "", index: String(i) },
            "aria-label": `${s.kind} step at ${s.name}${value ? ` = ${value}` : ""}, ${s.file || ""}, ${s.checked || ""}; select the node`,
            onclick: () => {
              if (!s.name) return;
              if (!S.nodes.has(s.name)) {
                setStatus(`${s.name} is not a node of the graph`);
                return;
              }
              clearError();
              selectNode(s.name);
            },
          },
          el("span", { class: "f-kind", text: s.kind || "" }),
          el("span", { class: "f-node", text: `${s.name ?? "—"}${value ? ` = ${value}` : ""}` }),
          el("span", { class: "f-checked", text: s.checked || "" }),
          el("span", { class: "f-where", text: `${s.file || ""}${s.function ? ` in ${s.function}` : ""}` }),
        );
        return el("li", {}, b);
      }),
    );
  }
  const guards = g.guards || [];
  const gl = $("#guards");
  const items = guards.map((x) => el("li", { text: typeof x === "string" ? x : JSON.stringify(x) }));
  if (!items.length) items.push(el("li", { class: "muted", text: "no guards" }));
  if (g.runtime_guards) items.push(el("li", { class: "muted", text: `${g.runtime_guards} checked at run time` }));
  gl.replaceChildren(...items);
}

// ---------------------------------------------------------------- callbacks form

const callbackSel = $("#callback");
let formFields = []; // {arg, read() -> {value, omit, error}, knob}

async function loadCallbacks() {
  const data = await api("/api/callbacks");
  S.callbacks = data.callbacks || [];
  callbackSel.replaceChildren(...S.callbacks.map((c) => el("option", { value: c.name, text: c.name })));
  renderCallbackForm();
}

function currentCallback() {
  return S.callbacks.find((c) => c.name === callbackSel.value) || null;
}

function niceStep(span) {
  if (!(span > 0) || !Number.isFinite(span)) return 0.01;
  const raw = span / 200;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

function isNum(x) {
  return typeof x === "number" && Number.isFinite(x);
}

function renderCallbackForm() {
  const cb = currentCallback();
  const box = $("#args");
  formFields = [];
  $("#callback-doc").textContent = cb ? cb.doc || "" : "";
  if (!cb) {
    box.replaceChildren();
    return;
  }
  const parts = [];
  for (const arg of cb.args || []) {
    const id = `arg-${arg.name}`;
    const nameCell = el("label", { class: "arg-name", for: id, title: arg.meaning || "" }, arg.name,
      arg.required ? el("span", { class: "req", "aria-hidden": "true", text: "*" }) : null);
    const inputCell = el("div", { class: "arg-input" });
    let read; // () -> {value}, {omit} or {error}
    const describe = [arg.meaning, arg.neutral !== null && arg.neutral !== undefined ? `neutral ${fmtValue(arg.neutral)}` : null,
      isNum(arg.low) || isNum(arg.high) ? `${isNum(arg.low) ? fmtNum(arg.low) : "−∞"} … ${isNum(arg.high) ? fmtNum(arg.high) : "∞"}` : null,
      arg.required ? "required" : null].filter(Boolean).join(" · ");
    const common = { id, "aria-required": arg.required ? "true" : null, "aria-describedby": `${id}-meaning`, dataset: { arg: arg.name } };
    if (arg.kind === "float" || arg.kind === "int") {
      const isInt = arg.kind === "int";
      const bounded = isNum(arg.low) && isNum(arg.high) && arg.high > arg.low;
      const num = el("input", { ...common, type: "number", step: isInt ? "1" : "any", placeholder: arg.nullable ? "null" : "" });
      if (isNum(arg.low)) num.min = String(arg.low);
      if (isNum(arg.high)) num.max = String(arg.high);
      if (isNum(arg.default)) num.value = String(arg.default);
      inputCell.append(num);
      if (bounded) {
        const range = el("input", {
          type: "range", id: `${id}-range`, min: String(arg.low), max: String(arg.high),
          step: isInt ? "1" : String(niceStep(arg.high - arg.low)),
          "aria-label": `${arg.name} slider`, dataset: { arg: arg.name },
        });
        range.value = num.value !== "" ? num.value : String(isNum(arg.neutral) ? arg.neutral : arg.low);
        range.addEventListener("input", () => {
          num.value = isInt ? String(Math.round(Number(range.value))) : String(Number(Number(range.value).toPrecision(6)));
          inputCell.classList.remove("invalid");
        });
        num.addEventListener("input", () => {
          const v = Number(num.value);
          if (num.value !== "" && Number.isFinite(v)) range.value = String(v);
          inputCell.classList.remove("invalid");
        });
        inputCell.append(range);
      }
      read = () => {
        if (num.validity.badInput) return { error: `${arg.name} is not a number` };
        if (num.value === "") {
          // empty is null where the argument takes null (shown as the placeholder), else refused:
          // never a default the field does not show
          if (arg.nullable) return { value: null };
          const was = isNum(arg.default) ? ` (its default is ${fmtNum(arg.default)})` : "";
          return { error: `${arg.name} is empty: give a number${was}` };
        }
        const v = Number(num.value);
        if (!Number.isFinite(v)) return { error: `${arg.name} is not a number: ${num.value}` };
        if (isInt && !Number.isInteger(v)) return { error: `${arg.name} is a whole number, got ${num.value}` };
        return { value: v };
      };
    } else if (arg.kind === "bool") {
      const box_ = el("input", { ...common, type: "checkbox" });
      box_.checked = arg.default === true;
      inputCell.append(box_);
      read = () => ({ value: box_.checked });
    } else {
      const text = el("input", { ...common, type: "text", spellcheck: "false", placeholder: arg.nullable ? "null" : "JSON" });
      if (arg.default !== null && arg.default !== undefined) text.value = JSON.stringify(arg.default);
      text.addEventListener("input", () => inputCell.classList.remove("invalid"));
      inputCell.append(text);
      read = () => {
        const s = text.value.trim();
        if (s === "") {
          if (arg.required) return { error: `${arg.name} is required (JSON)` };
          return { omit: true };
        }
        try {
          return { value: JSON.parse(s), raw: s };
        } catch (e) {
          return { error: `${arg.name} is not JSON (${e.message}); write e.g. -1, [1, 2], "text", null` };
        }
      };
    }
    let knob = null;
    const knobCell = el("span", { class: "knob-cell" });
    if (arg.controllable && ["float", "int", "bool"].includes(arg.kind)) {
      knob = el("input", { type: "checkbox", id: `knob-${arg.name}`, class: "knob-box", dataset: { arg: arg.name },
        "aria-label": `drive ${arg.name} live with a control` });
      knobCell.append(el("label", { class: "knob", title: "make this argument a live control" }, knob, "live"));
    }
    parts.push(nameCell, inputCell, knobCell, el("div", { class: "arg-meaning", id: `${id}-meaning`, text: describe }));
    formFields.push({ arg, read, knob, cell: inputCell });
  }
  if (!(cb.args || []).length) parts.push(el("div", { class: "arg-meaning", text: "no arguments" }));
  box.replaceChildren(...parts);
}

callbackSel.addEventListener("change", renderCallbackForm);

function uniqueControlName(base, taken) {
  let name = base.replace(/[^A-Za-z0-9_]/g, "_");
  let i = 2;
  const b = name;
  while (taken.has(name)) name = `${b}_${i++}`;
  taken.add(name);
  return name;
}

function rangeAround(v) {
  if (!isNum(v) || v === 0) return [-1, 1];
  const a = Math.abs(v);
  return v > 0 ? [0, 2 * a] : [-2 * a, 0];
}

/** The POST /api/bendings body the form describes; throws an Error naming what is wrong. */
function bendingBody() {
  const cb = currentCallback();
  if (!cb) throw new Error("choose a callback first");
  const pattern = targetEl.value.trim();
  if (!pattern) throw new Error("Target is empty: select a node or a weight, or type a regular expression over their names");
  const args = {};
  const controls = [];
  const taken = new Set(((S.state && S.state.controls) || []).map((c) => c.name));
  const problems = [];
  for (const f of formFields) {
    f.cell.classList.remove("invalid");
    const r = f.read();
    if (!r.error && f.knob && f.knob.checked && r.value === null) {
      r.error = `${f.arg.name} is empty: a live control starts from a number`;
    }
    if (r.error) {
      f.cell.classList.add("invalid");
      problems.push(r.error);
      continue;
    }
    if (f.knob && f.knob.checked) {
      const value = r.value;
      const name = uniqueControlName(`${cb.name.toLowerCase()}_${f.arg.name}`, taken);
      let range = null;
      if (f.arg.kind !== "bool") {
        const lo = isNum(f.arg.low) ? f.arg.low : null;
        const hi = isNum(f.arg.high) ? f.arg.high : null;
        const spread = (x) => Math.max(1, isNum(value) ? 2 * Math.abs(value - x) : 1);
        if (lo !== null && hi !== null) range = [lo, hi];
        else if (lo !== null) range = [lo, lo + spread(lo)];
        else if (hi !== null) range = [hi - spread(hi), hi];
        else range = rangeAround(value);
      }
      args[f.arg.name] = { control: name };
      const asFloat = (x) => (f.arg.kind === "float" && isNum(x) ? float(x) : x);
      controls.push({ name, value: asFloat(value), range: range && range.map(asFloat) });
      continue;
    }
    if (!r.omit) args[f.arg.name] = r.raw !== undefined ? new Raw(r.raw) : f.arg.kind === "float" && r.value !== null ? float(r.value) : r.value;
  }
  if (problems.length) throw new Error(`${cb.name}: ${problems.join("; ")}`);
  const kind = targetEl.dataset.kind;
  const multi = S.model && S.model.methods && S.model.methods.length > 1;
  const fn = multi && kind === "activation" && targetEl.dataset.name && pattern === exactPattern(targetEl.dataset.name) ? S.method : null;
  const body = { callback: { class: cb.name, args }, patterns: [pattern], fn };
  if (controls.length) body.controls = controls;
  return body;
}

const attachBtn = $("#attach");
$("#bend-form").addEventListener("submit", (e) => {
  e.preventDefault();
  action(async () => {
    const body = bendingBody();
    const st = await api("/api/bendings", { method: "POST", body });
    applyState(st);
    const keys = st.keys && st.keys.length ? st.keys[st.keys.length - 1].length : 0;
    setStatus(`attached ${body.callback.class} to ${body.patterns[0]}: ${keys} target${keys === 1 ? "" : "s"}`);
  }, { buttons: attachBtn });
});

targetEl.addEventListener("input", () => {
  // typed by hand: the pattern is no longer the selected name's
  if (targetEl.dataset.name && targetEl.value.trim() !== exactPattern(targetEl.dataset.name)) {
    delete targetEl.dataset.kind;
    delete targetEl.dataset.name;
  }
});

// ---------------------------------------------------------------- bending state

function applyState(st) {
  if (!st || typeof st !== "object") return;
  S.state = st;
  $("#undo").disabled = !(st.undo > 0);
  $("#redo").disabled = !(st.redo > 0);
  $("#undo").dataset.steps = String(st.undo || 0);
  $("#redo").dataset.steps = String(st.redo || 0);
  renderBendings();
  renderControls();
  updateBentMarks();
  for (const kind of ["weights", "activations"]) {
    tables[kind].stale = true;
    if (S.tab === kind) loadTable(kind);
  }
}

function bentKeys() {
  const all = new Set();
  for (const ks of (S.state && S.state.keys) || []) for (const k of ks || []) all.add(k);
  return all;
}

function updateBentMarks() {
  if (!S.graph) return;
  const keys = bentKeys();
  const names = [];
  for (const k of keys) {
    if (S.nodes.has(k)) names.push(k);
    else {
      // keys of activations may be scoped by method ("forward:encoder_0")
      const i = k.indexOf(":");
      if (i > 0 && k.slice(0, i) === S.method && S.nodes.has(k.slice(i + 1))) names.push(k.slice(i + 1));
    }
  }
  viewCall("setBent", names);
}

function renderBendings() {
  const list = $("#bendings");
  const st = S.state;
  const items = (st && st.config && st.config.bendings) || [];
  const active = document.activeElement;
  let refocus = null;
  if (active && list.contains(active) && active.dataset.index !== undefined) {
    refocus = { index: Number(active.dataset.index), act: active.dataset.act };
  }
  list.replaceChildren(
    ...items.map((b, i) => {
      const cb = b.callback || {};
      const args = Object.entries(cb.args || {}).map(([k, v]) => `${k}=${fmtValue(v)}`).join(", ");
      const keys = (st.keys && st.keys[i]) || b.keys || [];
      const label = `bending ${i + 1}, ${cb.class}`;
      const extra = Object.entries(b).filter(([k]) => !["callback", "patterns", "fn", "keys"].includes(k))
        .map(([k, v]) => `${k}=${fmtValue(v)}`).join(", ");
      return el(
        "li",
        { dataset: { index: String(i), callback: cb.class || "" }, title: keys.join("\n") },
        el("div", { class: "b-title" }, `${i + 1}. ${cb.class}`),
        el("div", { class: "b-args", text: args || "(defaults)" }),
        el("div", { class: "b-patterns" },
          `${(b.patterns || []).join("  ")}${b.fn ? `  in ${[].concat(b.fn).join(", ")}` : ""}${extra ? `  ${extra}` : ""}  → `,
          el("span", { class: "b-keys", dataset: { count: String(keys.length) }, text: `${keys.length} key${keys.length === 1 ? "" : "s"}` })),
        el("div", { class: "b-buttons" },
          el("button", { type: "button", class: "icon b-up", dataset: { index: String(i), act: "up" }, disabled: i === 0,
            "aria-label": `move ${label} up`, title: "move up", text: "↑" }),
          el("button", { type: "button", class: "icon b-down", dataset: { index: String(i), act: "down" }, disabled: i === items.length - 1,
            "aria-label": `move ${label} down`, title: "move down", text: "↓" }),
          el("button", { type: "button", class: "icon b-remove", dataset: { index: String(i), act: "remove" },
            "aria-label": `remove ${label}`, title: "remove", text: "×" })),
      );
    }),
  );
  if (!items.length) list.append(el("li", { class: "empty", text: "no bendings yet: choose a target and a callback, then Attach" }));
  $("#reset").disabled = !items.length;
  if (refocus && refocus.act) {
    let idx = refocus.index;
    if (refocus.act === "up") idx -= 1;
    else if (refocus.act === "down") idx += 1;
    idx = Math.max(0, Math.min(items.length - 1, idx));
    const buttons = $$(`button[data-index="${idx}"]`, list);
    const want = buttons.find((b) => b.dataset.act === refocus.act && !b.disabled) || buttons.find((b) => !b.disabled);
    if (want) want.focus();
    else $("#undo").disabled ? attachBtn.focus() : $("#undo").focus();
  }
}

$("#bendings").addEventListener("click", (e) => {
  const b = e.target.closest("button[data-act]");
  if (!b) return;
  const i = Number(b.dataset.index);
  const act = b.dataset.act;
  action(async () => {
    let st;
    if (act === "remove") st = await api(`/api/bendings/${i}`, { method: "DELETE" });
    else st = await api(`/api/bendings/${i}/move`, { method: "POST", body: { to: act === "up" ? i - 1 : i + 1 } });
    applyState(st);
    setStatus(act === "remove" ? `removed bending ${i + 1}` : `moved bending ${i + 1} ${act}`);
  });
});

async function undo() {
  if ($("#undo").disabled) return;
  await action(async () => {
    applyState(await api("/api/undo", { method: "POST" }));
    setStatus("undone");
  });
}

async function redo() {
  if ($("#redo").disabled) return;
  await action(async () => {
    applyState(await api("/api/redo", { method: "POST" }));
    setStatus("redone");
  });
}

$("#undo").addEventListener("click", undo);
$("#redo").addEventListener("click", redo);
$("#reset").addEventListener("click", () =>
  action(async () => {
    applyState(await api("/api/reset", { method: "POST" }));
    setStatus("every bending removed (Undo brings them back)");
  }),
);

// ---------------------------------------------------------------- controls

let controlsKey = "";
const senders = new Map(); // control name -> {last, timer, inflight, pending}

function controlKind(c) {
  const w = c.widget || {};
  if (w.kind) return w.kind;
  if (typeof c.value === "boolean") return "toggle";
  if (w.choices && w.choices.length) return "menu";
  return "knob";
}

/** How a range input maps to the control's value (linear, or log when the widget says so). */
function sliderMap(c) {
  const w = c.widget || {};
  let [lo, hi] = Array.isArray(c.range) && c.range.length === 2 && isNum(c.range[0]) && isNum(c.range[1]) && c.range[1] > c.range[0]
    ? c.range : rangeAround(c.value);
  const isInt = (isNum(w.step) && Number.isInteger(w.step) && w.step >= 1) ||
    (controlKind(c) === "slider" && Number.isInteger(c.value) && Number.isInteger(lo) && Number.isInteger(hi) && !isNum(w.step));
  if (w.curve === "log" && lo > 0 && hi > 0) {
    const a = Math.log(lo), b = Math.log(hi), N = 200;
    return {
      min: 0, max: N, step: 1, lo, hi, isInt, log: true,
      toSlider: (v) => String(Math.round(((Math.log(Math.min(hi, Math.max(lo, v))) - a) / (b - a)) * N)),
      fromSlider: (s) => {
        const v = Math.exp(a + (Number(s) / N) * (b - a));
        return isInt ? Math.round(v) : Number(v.toPrecision(5));
      },
    };
  }
  const step = isNum(w.step) && w.step > 0 ? w.step : isInt ? 1 : niceStep(hi - lo);
  return {
    min: lo, max: hi, step, lo, hi, isInt, log: false,
    toSlider: (v) => String(v),
    fromSlider: (s) => {
      const v = Number(s);
      return isInt ? Math.round(v) : Number(v.toPrecision(6));
    },
  };
}

function controlText(c, v) {
  const w = c.widget || {};
  const kind = controlKind(c);
  if (kind === "menu" && w.choices && w.choices[v] !== undefined) return String(w.choices[v]);
  if (typeof v === "boolean") return v ? "on" : "off";
  return `${fmtNum(v)}${w.unit ? " " + w.unit : ""}`;
}

function renderControls() {
  const box = $("#controls");
  const controls = (S.state && S.state.controls) || [];
  const key = JSON.stringify(controls.map((c) => [c.name, controlKind(c), c.range, c.widget || null]));
  if (key === controlsKey && box.querySelector(".control")) {
    // same controls: update values in place (an undo may have moved them), keeping the focus
    for (const c of controls) updateControlWidget(c, true);
    return;
  }
  controlsKey = key;
  const active = document.activeElement;
  const refocus = active && box.contains(active) ? active.dataset.name : null;
  if (!controls.length) {
    box.replaceChildren(el("p", { class: "muted empty", text: "no controls: tick “live” next to an argument before attaching" }));
    return;
  }
  const parts = [];
  for (const c of controls) {
    const w = c.widget || {};
    const kind = controlKind(c);
    const label = w.label || c.name;
    const id = `control-${c.name}`;
    const out = el("output", { class: "control-value", id: `${id}-value`, for: id, dataset: { name: c.name } });
    let input;
    if (kind === "toggle") {
      input = el("input", { type: "checkbox", class: "control", id, dataset: { name: c.name, kind } });
      input.checked = !!c.value;
      input.addEventListener("change", () => moveControl(c.name, input.checked, true));
    } else if (kind === "menu") {
      input = el("select", { class: "control", id, dataset: { name: c.name, kind } },
        ...(w.choices || []).map((ch, i) => el("option", { value: String(i), text: String(ch) })));
      input.value = String(c.value);
      input.addEventListener("change", () => moveControl(c.name, Number(input.value), true));
    } else {
      const m = sliderMap(c);
      input = el("input", { type: "range", class: "control", id, min: String(m.min), max: String(m.max), step: String(m.step),
        dataset: { name: c.name, kind, curve: m.log ? "log" : "linear" } });
      input.value = m.toSlider(c.value);
      input.dataset.value = String(c.value);
      input.addEventListener("input", () => moveControl(c.name, m.fromSlider(input.value), false));
      input.addEventListener("change", () => moveControl(c.name, m.fromSlider(input.value), true));
      input._map = m;
    }
    input.setAttribute("aria-label", `${label}${w.unit ? ` (${w.unit})` : ""}`);
    out.textContent = controlText(c, c.value);
    parts.push(el("label", { class: "control-label", for: id, title: c.name, text: label }), input, out);
  }
  box.replaceChildren(...parts);
  if (refocus) {
    const again = box.querySelector(`.control[data-name="${CSS.escape(refocus)}"]`);
    if (again) again.focus();
  }
}

function updateControlWidget(c, force) {
  const box = $("#controls");
  const input = box.querySelector(`.control[data-name="${CSS.escape(c.name)}"]`);
  const out = box.querySelector(`output[data-name="${CSS.escape(c.name)}"]`);
  if (out) out.textContent = controlText(c, c.value);
  if (!input) return;
  if (!force && document.activeElement === input) return;
  if (input.type === "checkbox") input.checked = !!c.value;
  else if (input.tagName === "SELECT") input.value = String(c.value);
  else if (input._map) {
    input.value = input._map.toSlider(c.value);
    input.dataset.value = String(c.value);
  }
}

/** Record a control's new value locally (STATE, the saved config) and show it. */
function setLocalControl(name, value) {
  const st = S.state;
  if (!st) return null;
  const c = (st.controls || []).find((x) => x.name === name);
  if (c) c.value = value;
  const cc = ((st.config && st.config.controls) || []).find((x) => x.name === name);
  if (cc) cc.value = value;
  if (c) {
    const out = $(`#controls output[data-name="${CSS.escape(name)}"]`);
    if (out) out.textContent = controlText(c, value);
    const input = $(`#controls .control[data-name="${CSS.escape(name)}"]`);
    if (input && input._map) input.dataset.value = String(value);
  }
  return c;
}

const CONTROL_INTERVAL_MS = 33; // ~30 moves a second

function moveControl(name, value, final) {
  setLocalControl(name, value);
  let s = senders.get(name);
  if (!s) {
    s = { last: 0, timer: null, inflight: false, pending: undefined, value: undefined };
    senders.set(name, s);
  }
  s.value = value;
  clearTimeout(s.timer);
  const wait = CONTROL_INTERVAL_MS - (performance.now() - s.last);
  if (final || wait <= 0) sendControl(name, s);
  else s.timer = setTimeout(() => sendControl(name, s), wait);
}

function sendControl(name, s) {
  s.last = performance.now();
  const value = s.value;
  if (live.ws && live.ws.readyState === WebSocket.OPEN && live.started) {
    live.ws.send(JSON.stringify({ type: "control", name, value }));
    return;
  }
  if (s.inflight) {
    s.pending = value; // the latest value goes when the one in flight is answered
    return;
  }
  s.inflight = true;
  api(`/api/controls/${enc(name)}`, { method: "POST", body: { value } })
    .then((res) => {
      if (res && s.pending === undefined && res.value !== undefined && res.value !== value) {
        const c = setLocalControl(name, res.value); // the server may clamp or round
        if (c) updateControlWidget(c, false);
      }
    })
    .catch((e) => showError(e))
    .finally(() => {
      s.inflight = false;
      if (s.pending !== undefined) {
        s.value = s.pending;
        s.pending = undefined;
        sendControl(name, s);
      }
    });
}

// ---------------------------------------------------------------- saving and loading configurations

async function loadConfigs() {
  const data = await api("/api/configs");
  const names = data.configs || [];
  const list = $("#configs");
  list.replaceChildren(
    ...names.map((n) =>
      el("li", { dataset: { name: n } }, el("span", { text: n }),
        el("button", { type: "button", class: "load-config", dataset: { name: n }, "aria-label": `load configuration ${n}`, text: "Load" })),
    ),
  );
  if (!names.length) list.append(el("li", { class: "muted", text: "no saved configurations" }));
}

$("#save").addEventListener("click", () =>
  action(async () => {
    const name = $("#config-name").value.trim();
    if (!name) throw new Error("give the configuration a name: letters, digits, - and _ (1 to 64)");
    const res = await api("/api/configs", { method: "POST", body: { name } });
    setStatus(`saved ${res.name}${res.path ? ` to ${res.path}` : ""}`);
    await loadConfigs();
  }, { buttons: $("#save") }),
);
$("#config-name").addEventListener("keydown", (e) => {
  if (e.key === "Enter") {
    e.preventDefault();
    $("#save").click();
  }
});

$("#export").addEventListener("click", () =>
  action(async () => {
    const name = $("#export-name").value.trim();
    if (!name) throw new Error("give the file a name: letters, digits, - and _ (1 to 64)");
    const res = await api("/api/export", { method: "POST", body: { name } });
    const report = $("#export-report");
    report.replaceChildren(
      el("a", { href: res.url, download: res.name, text: `download ${res.name}` }),
      document.createTextNode(`\n${res.report}\n\n${res.latency}`),
    );
    setStatus(`exported ${res.name} for nn~ (checked as nn~ calls it)`);
  }, { buttons: $("#export") }),
);

$("#configs").addEventListener("click", (e) => {
  const b = e.target.closest("button.load-config");
  if (!b) return;
  const name = b.dataset.name;
  action(async () => {
    const config = await api(`/api/configs/${enc(name)}`, { as: "text" }); // as written: 1.0 stays a float
    applyState(await api("/api/config", { method: "PUT", body: new Raw(config) }));
    setStatus(`loaded ${name}`);
  }, { buttons: b });
});

$("#download").addEventListener("click", () =>
  action(async () => {
    let text;
    try {
      // the server's text keeps 1.0 a float (a float control), which JSON.parse alone loses
      text = jsonText(JSON.parse(await api("/api/config", { as: "text" }), keepFloats).config, 2);
    } catch {
      if (!S.state) throw new Error("no configuration loaded yet");
      text = JSON.stringify(S.state.config, null, 2);
    }
    download(text);
  }, { buttons: $("#download") }),
);

function download(text) {
  const blob = new Blob([text + "\n"], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const a = el("a", { href: url, download: "bending.json" });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
  setStatus("downloaded bending.json");
}

$("#open-json").addEventListener("click", () => $("#open-json-file").click());
$("#open-json-file").addEventListener("change", (e) => {
  const input = e.target;
  const file = input.files && input.files[0];
  if (!file) return;
  action(async () => {
    const text = await file.text();
    try {
      JSON.parse(text);
    } catch (err) {
      throw new Error(`${file.name} is not JSON: ${err.message}`);
    }
    applyState(await api("/api/config", { method: "PUT", body: new Raw(text.trim()) })); // as written
    setStatus(`opened ${file.name}`);
  }, { buttons: $("#open-json") }).finally(() => {
    input.value = "";
  });
});

// ---------------------------------------------------------------- sounds

const soundSel = $("#sound");

async function loadSounds(current) {
  const data = await api("/api/sounds");
  S.sounds = data;
  const groups = { shipped: [], upload: [], argument: [] };
  for (const s of data.sounds || []) (groups[s.source] || (groups[s.source] = [])).push(s);
  const label = { shipped: "shipped", upload: "uploaded", argument: "given" };
  const opts = [];
  for (const [src, list] of Object.entries(groups)) {
    if (!list.length) continue;
    opts.push(el("optgroup", { label: label[src] || src },
      ...list.map((s) => el("option", { value: s.id, text: `${s.name || s.id} · ${fmtNum(s.seconds)} s` }))));
  }
  soundSel.replaceChildren(...opts);
  const want = current || data.current;
  if (want) soundSel.value = want;
  const lim = data.limits || {};
  const limits = $("#sound-limits");
  limits.textContent = [
    isNum(lim.bytes) ? `≤ ${fmtBytes(lim.bytes)}` : null,
    isNum(lim.seconds) ? `≤ ${fmtNum(lim.seconds)} s` : null,
  ].filter(Boolean).join(", ");
  limits.title = `uploads: ${limits.textContent}; ${(lim.types || []).join(" ")}`;
  limits.dataset.types = (lim.types || []).join(" ");
  $("#upload").title = `upload a sound file (${(lim.types || []).join(" ")}; ${limits.textContent})`;
}

soundSel.addEventListener("change", () =>
  action(async () => {
    const res = await api("/api/sounds/current", { method: "POST", body: { id: soundSel.value } });
    setStatus(`sound: ${res.current}`);
    restartLive();
  }),
);

/** Live with another sound: start the stream again on the same socket. */
function restartLive() {
  if (!live.ws || live.ws.readyState !== WebSocket.OPEN || !live.started) return;
  live.started = false; // blocks of the old sound still on their way are dropped
  live.ws.send(JSON.stringify({ type: "start", sound: soundSel.value || null, block: null }));
}

$("#upload").addEventListener("click", () => $("#upload-file").click());
$("#upload-file").addEventListener("change", (e) => {
  const input = e.target;
  const file = input.files && input.files[0];
  if (!file) return;
  action(async () => {
    setStatus(`uploading ${file.name} (${fmtBytes(file.size)})…`);
    const entry = await api(`/api/sounds?name=${enc(file.name)}`, {
      method: "POST", body: file, headers: { "Content-Type": file.type || "application/octet-stream" },
    });
    await loadSounds(entry.id);
    restartLive();
    setStatus(`uploaded ${entry.name || file.name}: ${fmtNum(entry.seconds)} s, ${entry.sample_rate} Hz`);
  }, { buttons: $("#upload") }).finally(() => {
    input.value = "";
  });
});

// ---------------------------------------------------------------- render

const renderBtn = $("#render");
const player = $("#player");
let rendering = null;

function doRender() {
  if (rendering) return rendering;
  rendering = action(async () => {
    setStatus("rendering…");
    const body = {};
    if (soundSel.value) body.sound = soundSel.value;
    const secs = Number($("#seconds").value);
    if ($("#seconds").value !== "" && secs > 0) body.seconds = secs;
    const t0 = performance.now();
    const r = await api("/api/render", { method: "POST", body });
    S.render = r;
    drawRender();
    showRenderInfo(r);
    setPlayerSource(abKind(), true);
    setStatus(`rendered ${r.sound} in ${fmtNum((performance.now() - t0) / 1000)} s`);
    return r;
  }, { buttons: renderBtn }).finally(() => {
    rendering = null;
  });
  return rendering;
}

renderBtn.addEventListener("click", () => doRender());

function showRenderInfo(r) {
  const info = $("#render-info");
  info.replaceChildren(
    `${r.id} · ${r.sound} · ${fmtNum(r.seconds)} s at ${r.sample_rate} Hz · ${r.how || ""} · ${fmtNum(r.realtime_factor)}× realtime · `,
    el("span", { class: r.differs ? "differs" : "same", id: "differs",
      text: r.differs ? `bended differs from unbent (distance ${fmtNum(r.distance)})` : "bended = unbent: the bendings change nothing audible" }),
    ...((r.flags || []).length
      ? [" · ", el("span", { class: "flags", id: "render-flags", text: `flagged: ${r.flags.join(", ")}` })]
      : []),
    ...(r.safety
      ? [" · ", el("span", { class: "safety", id: "render-safety", text: r.safety })]
      : []),
  );
  info.dataset.flags = (r.flags || []).join(" ");
  info.dataset.differs = r.differs ? "1" : "0";
}

const KIND_COLOUR = { input: "#8fa3bf", unbent: "#6cc3d5", bended: "#f08a4b" };

function drawRender() {
  const r = S.render;
  if (!r || !r.views) return;
  for (const kind of ["input", "unbent", "bended"]) {
    const v = r.views[kind];
    const wave = $(`canvas.waveform[data-kind="${kind}"]`);
    const spec = $(`canvas.spectrogram[data-kind="${kind}"]`);
    if (!v) continue;
    drawWaveform(wave, v.waveform, KIND_COLOUR[kind]);
    drawSpectrogram(spec, v.spectrogram);
  }
}

function drawWaveform(canvas, wf, colour) {
  const { ctx, w, h } = fitCanvas(canvas);
  ctx.fillStyle = "#121316";
  ctx.fillRect(0, 0, w, h);
  ctx.fillStyle = "#30343c";
  ctx.fillRect(0, Math.floor(h / 2), w, 1);
  if (!wf || !wf.min || !wf.max) return;
  const n = Math.min(wf.min.length, wf.max.length);
  if (!n) return;
  ctx.fillStyle = colour;
  const bw = w / n;
  for (let i = 0; i < n; i++) {
    const hi = Math.max(-1, Math.min(1, wf.max[i]));
    const lo = Math.max(-1, Math.min(1, wf.min[i]));
    const y1 = ((1 - hi) / 2) * h;
    const y2 = ((1 - lo) / 2) * h;
    ctx.fillRect(i * bw, y1, Math.max(1, bw), Math.max(1, y2 - y1));
  }
  canvas.dataset.drawn = "1";
}

function drawSpectrogram(canvas, sp) {
  const { ctx, w, h } = fitCanvas(canvas);
  ctx.fillStyle = "#000004";
  ctx.fillRect(0, 0, w, h);
  if (!sp || !sp.rows || !sp.cols) return;
  const data = decodeBase64(sp.data);
  const img = gridImage(data, sp.rows, sp.cols, MAGMA, true); // row 0 (lowest frequency) at the bottom
  ctx.imageSmoothingEnabled = true;
  ctx.drawImage(img, 0, 0, w, h);
  const nyquist = S.render ? fmtNum(S.render.sample_rate / 2000) : "?";
  canvas.title = `30 Hz (bottom) to ${nyquist} kHz (top), log frequency; ${sp.low_db} to ${sp.high_db} dB full scale`;
  canvas.dataset.drawn = "1";
}

const redrawSoon = debounce(() => {
  drawRender();
  if (S.picture && !$("#panel-node").hidden) drawPicture(S.picture);
}, 100);
if (typeof ResizeObserver === "function") {
  const ro = new ResizeObserver(redrawSoon);
  ro.observe($("#renders"));
  ro.observe($("#node-picture"));
} else {
  window.addEventListener("resize", redrawSoon);
}

// ---------------------------------------------------------------- playback, A/B

function abKind() {
  const r = document.querySelector('#ab input[name="ab"]:checked');
  return r ? r.value : "bended";
}

function setPlayerSource(kind, keep) {
  const r = S.render;
  for (const row of $$(".render-row")) row.classList.toggle("playing", row.dataset.kind === kind);
  player.dataset.srcKind = kind;
  if (!r || !r.audio || !r.audio[kind]) return;
  const url = withToken(r.audio[kind]);
  const hadSource = !!player.getAttribute("src");
  const t = hadSource && !player.ended ? player.currentTime : 0;
  const wasPlaying = hadSource && !player.paused && !player.ended;
  player.dataset.render = r.id;
  player.src = url;
  if (keep && hadSource && t > 0) {
    player.addEventListener("loadedmetadata", () => {
      try {
        player.currentTime = Math.min(t, Math.max(0, (player.duration || t) - 0.01));
      } catch {
        /* not seekable: start from the beginning */
      }
    }, { once: true });
  }
  if (wasPlaying) play();
}

for (const radio of $$('#ab input[name="ab"]')) {
  radio.addEventListener("change", () => {
    if (radio.checked) setPlayerSource(radio.value, true);
  });
}

function play() {
  const p = player.play();
  if (p && typeof p.catch === "function") {
    p.catch((e) => {
      if (e && e.name === "AbortError") return; // a new source replaced this one
      showError(`cannot play ${player.dataset.srcKind || "the sound"}: ${e.message || e}`);
    });
  }
}

async function togglePlay() {
  if (!S.render) {
    const r = await doRender();
    if (!r) return;
  }
  if (!player.getAttribute("src")) setPlayerSource(abKind(), false);
  if (player.paused || player.ended) play();
  else player.pause();
}

$("#play").addEventListener("click", () => togglePlay());

function syncPlayButton() {
  const playing = !player.paused && !player.ended;
  $("#play").textContent = playing ? "Pause" : "Play";
  $("#play").setAttribute("aria-pressed", playing ? "true" : "false");
  player.dataset.playing = playing ? "1" : "0";
}
for (const ev of ["play", "playing", "pause", "ended", "emptied"]) player.addEventListener(ev, syncPlayButton);
player.addEventListener("error", () => {
  if (!player.getAttribute("src")) return;
  const err = player.error;
  showError(`cannot load the ${player.dataset.srcKind || ""} audio${err && err.message ? `: ${err.message}` : ""} (render again?)`);
});

// ---------------------------------------------------------------- live

const live = { ws: null, ctx: null, started: false, stopping: false, sr: 0, block: 0, nextTime: 0, pending: 0, timer: null, blocks: 0, underruns: 0 };
const liveBtn = $("#live");
const liveStats = $("#live-stats");
const QUEUE_S = 0.5;

function setLiveButton(on) {
  liveBtn.setAttribute("aria-pressed", on ? "true" : "false");
  liveBtn.textContent = on ? "Stop live" : "Live";
}

function startLive() {
  clearError();
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const url = withToken(`${proto}//${location.host}/api/live`);
  let ws;
  try {
    ws = new WebSocket(url);
  } catch (e) {
    showError(`cannot open the live connection: ${e.message || e}`);
    return;
  }
  ws.binaryType = "arraybuffer";
  Object.assign(live, { ws, started: false, stopping: false, pending: 0, blocks: 0, underruns: 0, nextTime: 0 });
  try {
    const Ctx = window.AudioContext || window.webkitAudioContext;
    try {
      live.ctx = new Ctx({ sampleRate: (S.model && S.model.sample_rate) || 44100, latencyHint: "interactive" });
    } catch {
      live.ctx = new Ctx();
    }
  } catch (e) {
    showError(`live needs WebAudio, which this browser refuses: ${e.message || e}`);
    stopLive(true);
    return;
  }
  setLiveButton(true);
  liveStats.textContent = "connecting…";
  ws.addEventListener("open", () => {
    ws.send(JSON.stringify({ type: "start", sound: soundSel.value || null, block: null }));
  });
  ws.addEventListener("message", (ev) => {
    if (ws !== live.ws) return;
    if (typeof ev.data === "string") {
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        return;
      }
      onLiveMessage(msg);
    } else if (ev.data instanceof ArrayBuffer) {
      onLiveBlock(ev.data);
    }
  });
  ws.addEventListener("close", (ev) => {
    if (ws !== live.ws) return;
    if (!live.stopping) {
      const why = `${ev.reason ? ` (${ev.reason})` : ""}${ev.code && ev.code !== 1000 ? `, code ${ev.code}` : ""}`;
      showError(live.started
        ? `live stopped: the server went away or closed the connection${why}`
        : `cannot start live: the server refused or could not be reached${why}`);
    }
    stopLive(true);
  });
}

function onLiveMessage(msg) {
  if (msg.type === "started") {
    live.started = true;
    live.sr = msg.sample_rate || (S.model && S.model.sample_rate) || 44100;
    live.block = msg.block || (S.model && S.model.block_size) || 8192;
    live.ctx.resume().catch(() => {});
    live.pending = 0;
    live.nextTime = Math.max(live.nextTime || 0, live.ctx.currentTime + 0.05); // after what is queued (a new sound)
    liveStats.textContent = `started · ${live.sr} Hz · blocks of ${live.block}${isNum(msg.latency_ms) ? ` · latency ${fmtNum(msg.latency_ms)} ms` : ""}`;
    liveStats.dataset.started = "1";
    if (msg.warning) showError(`live: ${msg.warning}`);
    topUp();
    clearInterval(live.timer);
    live.timer = setInterval(topUp, 50);
    setStatus("live");
  } else if (msg.type === "stats") {
    liveStats.dataset.latencyMs = String(msg.latency_ms);
    liveStats.dataset.realtimeFactor = String(msg.realtime_factor);
    liveStats.dataset.blocks = String(live.blocks);
    liveStats.textContent = `latency ${fmtNum(msg.latency_ms)} ms · ${fmtNum(msg.realtime_factor)}× realtime · compute ${fmtNum(msg.compute_ms)} ms · block ${msg.index}${live.underruns ? ` · ${live.underruns} gaps` : ""}`;
  } else if (msg.type === "control") {
    // the server's word on a control moved over the socket (it may clamp or round)
    const c = msg.name !== undefined && msg.value !== undefined ? setLocalControl(msg.name, msg.value) : null;
    if (c) updateControlWidget(c, false);
  } else if (msg.type === "error") {
    showError(msg.error || "live error");
  }
}

function topUp() {
  if (!live.ws || live.ws.readyState !== WebSocket.OPEN || !live.started || !live.ctx) return;
  const blockDur = live.block / live.sr;
  const queued = Math.max(0, live.nextTime - live.ctx.currentTime);
  const need = QUEUE_S - queued - live.pending * blockDur;
  if (need <= 0) return;
  const count = Math.max(1, Math.ceil(need / blockDur));
  live.pending += count;
  live.ws.send(JSON.stringify({ type: "more", count }));
}

function onLiveBlock(buf) {
  if (!live.ctx || !live.started) return;
  live.pending = Math.max(0, live.pending - 1);
  live.blocks += 1;
  const samples = new Float32Array(buf.byteLength >= 4 ? buf.slice(0, buf.byteLength - (buf.byteLength % 4)) : new ArrayBuffer(0));
  if (!samples.length) return;
  const ab = live.ctx.createBuffer(1, samples.length, live.sr);
  ab.copyToChannel(samples, 0);
  const src = live.ctx.createBufferSource();
  src.buffer = ab;
  src.connect(live.ctx.destination);
  const now = live.ctx.currentTime;
  let t = live.nextTime;
  if (t < now + 0.01) {
    if (live.blocks > 1) live.underruns += 1;
    t = now + 0.03;
  }
  src.start(t);
  live.nextTime = t + ab.duration;
  topUp();
}

function stopLive(quiet = false) {
  live.stopping = true;
  clearInterval(live.timer);
  live.timer = null;
  const ws = live.ws;
  live.ws = null;
  live.started = false;
  if (ws) {
    try {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "stop" }));
      ws.close(1000, "stopped");
    } catch {
      /* already closed */
    }
  }
  if (live.ctx) {
    live.ctx.close().catch(() => {});
    live.ctx = null;
  }
  setLiveButton(false);
  delete liveStats.dataset.started;
  liveStats.textContent = quiet ? "" : "stopped";
  if (!quiet) setStatus("live stopped");
}

liveBtn.addEventListener("click", () => {
  if (live.ws) stopLive();
  else startLive();
});

// ---------------------------------------------------------------- keyboard

document.addEventListener("keydown", (e) => {
  if (e.defaultPrevented || e.isComposing) return;
  const t = e.target;
  const mod = e.ctrlKey || e.metaKey;
  if (mod && !e.altKey && (e.key === "z" || e.key === "Z" || e.key === "y" || e.key === "Y")) {
    if (isTextField(t)) return; // the field's own undo
    e.preventDefault();
    if (e.key.toLowerCase() === "y" || e.shiftKey) redo();
    else undo();
    return;
  }
  if (mod || e.altKey) return;
  if (e.key === "/" && !isTyping(t)) {
    e.preventDefault();
    searchEl.focus();
    searchEl.select();
  } else if ((e.key === "r" || e.key === "R") && !isTyping(t)) {
    e.preventDefault();
    doRender();
  } else if (e.key === " " && !takesSpace(t)) {
    e.preventDefault();
    togglePlay();
  }
});

// ---------------------------------------------------------------- discover

const discover = { descriptor: null, rows: [] };
const rankBtn = $("#rank");
const knobBtn = $("#make-knob");

async function loadDiscover() {
  const d = await api("/api/discover");
  $("#descriptor").replaceChildren(...d.descriptors.map((n) => el("option", { value: n, text: n })));
  $("#discover-seconds").max = String(d.seconds);
  $("#discover-seconds").value = String(d.seconds);
  $("#discover-hint").textContent = `ranks the channels on the current sound's first seconds (at most ${d.seconds}); ` +
    `at most ${d.probe_renders} probe renders: nodes past them are left out (name them in Targets)`;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function renderRanking(job) {
  const r = job.result;
  discover.descriptor = job.descriptor;
  discover.rows = r.rows;
  const tbody = $("#discover-table").tBodies[0];
  tbody.replaceChildren(...r.rows.map((row, i) => {
    const cells = [row.node, row.channel, fmtNum(row.effect), fmtNum(row.specificity), fmtNum(row.random_ratio)];
    return el("tr", { tabindex: i ? "-1" : "0", dataset: { name: row.node, channel: String(row.channel) }, title: `changes: ${Object.entries(row.changes).map(([k, v]) => `${k} ${fmtNum(v)}`).join(", ")}` },
      ...cells.map((c) => el("td", { text: c })));
  }));
  const left = job.left_out.length ? `; ${job.left_out.length} node${job.left_out.length === 1 ? "" : "s"} left out by the cap (name them in Targets)` : "";
  $("#rank-status").textContent = `${job.descriptor}: ${r.count} channels of ${job.nodes.length} node${job.nodes.length === 1 ? "" : "s"} on ${job.sound} (${job.seconds} s)${left}`;
}

$("#discover-form").addEventListener("submit", (e) => {
  e.preventDefault();
  action(async () => {
    const body = { descriptor: $("#descriptor").value };
    const targets = $("#discover-targets").value.trim();
    if (targets) body.targets = targets;
    const seconds = Number($("#discover-seconds").value);
    if ($("#discover-seconds").value !== "" && Number.isFinite(seconds)) body.seconds = seconds;
    const bar = $("#rank-progress");
    const said = $("#rank-status");
    knobBtn.disabled = true;
    try {
      let job = await api("/api/discover/rank", { method: "POST", body });
      bar.hidden = false;
      while (job.state === "running") {
        bar.max = Math.max(1, job.total);
        bar.value = job.done;
        said.textContent = `ranking by ${job.descriptor}: ${job.done} of ${job.total} nodes${job.node ? ` (${job.node})` : ""}…`;
        await sleep(250);
        job = await api(`/api/discover/rank/${enc(job.job)}`);
      }
      if (job.state === "failed") throw new ApiError(job.error, job.status);
      renderRanking(job);
      setStatus(`ranked ${job.nodes.length} node${job.nodes.length === 1 ? "" : "s"} by ${job.descriptor}`);
    } catch (err) {
      said.textContent = "";
      throw err;
    } finally {
      bar.hidden = true;
      knobBtn.disabled = !discover.descriptor;
    }
  }, { buttons: rankBtn });
});

knobBtn.addEventListener("click", () => action(async () => {
  const descriptor = discover.descriptor;
  setStatus(`finding a ${descriptor} knob…`);
  const got = await api("/api/discover/knob", { method: "POST", body: { descriptor } });
  const k = got.knob;
  applyState(got.state);
  $("#knob-info").textContent = `${k.description}: control “${k.control.name}”, −1 to 1, in Bend`;
  setStatus(`attached a ${descriptor} knob at ${k.node}`);
  setTab("bend");
  const slider = $(`#controls .control[data-name="${CSS.escape(k.control.name)}"]`);
  if (slider) slider.scrollIntoView({ block: "nearest" });
}, { buttons: knobBtn }));

rowsPick($("#discover-table").tBodies[0], (tr) => {
  if (S.nodes.has(tr.dataset.name)) selectNode(tr.dataset.name);
});

// ---------------------------------------------------------------- start

let ready = false;

async function init() {
  setStatus("loading…");
  await createView();
  await loadModel();
  const [, , st, last] = await Promise.all([loadGraph(), loadCallbacks(), api("/api/config"), api("/api/render"), loadSounds(), loadDiscover()]);
  applyState(st);
  if (last.render) {
    // a reloaded page shows the session's last render again, ready to play
    S.render = last.render;
    drawRender();
    showRenderInfo(last.render);
  }
  setPlayerSource(abKind(), false);
  try {
    await loadConfigs();
  } catch (e) {
    showError(e);
  }
  ready = true;
  document.body.dataset.ready = "1";
  setStatus(`${S.model.model}: ${S.nodes.size} nodes in ${S.method}, ${S.callbacks.length} callbacks`);
}

const readyPromise = init().then(
  () => true,
  (e) => {
    showError(e);
    document.body.dataset.ready = "error";
    return false;
  },
);

window.studio = {
  ready: readyPromise,
  state: () => S.state,
  lastRender: () => S.render,
  get graph() {
    return S.view;
  },
  selected: () => S.selected,
  model: () => S.model,
  isReady: () => ready,
  live: () => ({ open: !!live.ws, started: live.started, blocks: live.blocks, pending: live.pending, underruns: live.underruns }),
};
