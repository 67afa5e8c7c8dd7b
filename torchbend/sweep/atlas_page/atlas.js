"use strict";
(() => {
  const data = JSON.parse(document.getElementById("atlas-data").textContent);
  const rows = data.rows;
  const NS = document.getElementById("map").namespaceURI;
  const W = 960, H = 600, L = 66, R = 18, T = 18, B = 58;
  const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779",
    "#6ece58", "#b5de2b", "#fde725"];
  // descriptor effects: blue (less than the unbent render), white (no change), red (more)
  const DIVERGING = ["#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582",
    "#d6604d", "#b2182b"];
  const effects = new Set(data.effects || []);
  const $ = (id) => document.getElementById(id);
  const svg = $("map"), tip = $("tip"), player = $("player"), unbent = $("unbent");

  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "-";
    if (typeof v !== "number") return String(v);
    if (v !== 0 && (Math.abs(v) >= 1e6 || Math.abs(v) < 1e-3)) return v.toExponential(2);
    return String(+v.toPrecision(4));
  }
  function ticks(a, b, n) {
    const raw = (b - a) / n, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
    const step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag, out = [];
    for (let k = Math.ceil(a / step); k * step <= b; k++) out.push(k * step);
    return out;
  }
  function mix(a, b, f) {
    let out = "#";
    for (const k of [1, 3, 5]) {
      const p = parseInt(a.slice(k, k + 2), 16), q = parseInt(b.slice(k, k + 2), 16);
      out += Math.round(p + (q - p) * f).toString(16).padStart(2, "0");
    }
    return out;
  }
  function ramp(t, colours = VIRIDIS) {
    const s = Math.min(1, Math.max(0, t)) * (colours.length - 1);
    const i = Math.min(colours.length - 2, Math.floor(s));
    return mix(colours[i], colours[i + 1], s - i);
  }
  function encoded(path) {
    return path.split("/").map(encodeURIComponent).join("/");
  }

  // -- the frame: bounds, grid, axis names, the strip of failed renders
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const r of rows) {
    x0 = Math.min(x0, r.x); x1 = Math.max(x1, r.x); y0 = Math.min(y0, r.y); y1 = Math.max(y1, r.y);
  }
  if (!(x1 - x0 > 1e-9)) { x0 = (rows.length ? x0 : 0) - 1; x1 = x0 + 2; }
  if (!(y1 - y0 > 1e-9)) { y0 = (rows.length ? y0 : 0) - 1; y1 = y0 + 2; }
  const padX = (x1 - x0) * 0.04, padY = (y1 - y0) * 0.06;
  x0 -= padX; x1 += padX; y0 -= padY; y1 += padY;
  const sx = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = (y) => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const frame = svgEl("g", {});
  const limit = data.strip === null ? x1 : data.strip;
  for (const t of ticks(x0, x1, 8)) {
    if (t > limit) continue;
    const X = sx(t).toFixed(1);
    frame.append(svgEl("line", {x1: X, x2: X, y1: T, y2: H - B, class: t ? "grid" : "zero"}));
    frame.append(svgEl("text", {x: X, y: H - B + 16, class: "tick", "text-anchor": "middle"},
      fmt(t)));
  }
  for (const t of ticks(y0, y1, 6)) {
    const Y = sy(t).toFixed(1);
    frame.append(svgEl("line", {x1: L, x2: W - R, y1: Y, y2: Y, class: t ? "grid" : "zero"}));
    frame.append(svgEl("text", {x: L - 6, y: +Y + 4, class: "tick", "text-anchor": "end"},
      fmt(t)));
  }
  frame.append(svgEl("rect", {x: L, y: T, width: W - L - R, height: H - T - B, class: "box"}));
  frame.append(svgEl("text", {x: L + (W - L - R) / 2, y: H - 16, class: "label",
    "text-anchor": "middle"}, data.axes[0]));
  frame.append(svgEl("text", {x: 0, y: 0, class: "label", "text-anchor": "middle",
    transform: `translate(16 ${T + (H - T - B) / 2}) rotate(-90)`}, data.axes[1]));
  if (data.strip !== null) {
    const X = sx(data.strip).toFixed(1);
    frame.append(svgEl("line", {x1: X, x2: X, y1: T, y2: H - B, class: "sep"}));
    frame.append(svgEl("text", {x: +X + 6, y: T + 14, class: "tick"}, "failed"));
  }
  svg.append(frame);

  // -- the points
  const size = rows.length > 500 ? 3 : 5;
  const layer = svgEl("g", {id: "points"});
  const nodes = rows.map((r, i) => {
    const X = sx(r.x), Y = sy(r.y), a = (X - size).toFixed(1), b = (X + size).toFixed(1);
    const c = (Y - size).toFixed(1), d = (Y + size).toFixed(1);
    r.X = X; r.Y = Y; r.v = true;
    let n;
    if (r.kind === "broken") n = svgEl("path", {d: `M${a},${c}L${b},${d}M${a},${d}L${b},${c}`});
    else if (r.kind === "failed") {
      n = svgEl("rect", {x: a, y: c, width: 2 * size, height: 2 * size});
    } else n = svgEl("circle", {cx: X.toFixed(1), cy: Y.toFixed(1), r: size});
    n.setAttribute("class", r.kind === "ok" ? "pt" : `pt ${r.kind}`);
    n.setAttribute("data-i", i);
    n.setAttribute("data-id", r.id);
    layer.append(n);
    return n;
  });
  svg.append(layer);
  const ring = svgEl("circle", {r: size + 4, class: "ring", visibility: "hidden"});
  const cursorRing = svgEl("circle", {r: size + 7, class: "cursor", visibility: "hidden"});
  svg.append(ring, cursorRing);

  // -- what a render is: the tooltip and the player's panel
  function section(box, title) { box.append(el("div", "sec", title)); }
  function describe(r, box) {
    box.replaceChildren();
    const input = data.inputs[r.input];
    box.append(el("div", "tid", r.id), el("div", "sub", `input: ${input.path}`));
    if (r.kind === "failed") box.append(el("div", "bad", `failed: ${r.error || "no measures"}`));
    else if (r.broken) box.append(el("div", "bad", `broken: ${r.flags.join(", ") || "flagged"}`));
    if (r.axes.length) {
      section(box, "axes");
      for (const [k, v] of r.axes) box.append(el("div", "mono", `${k} = ${v}`));
    }
    section(box, "bendings");
    if (!r.bendings.length) box.append(el("div", "sub", "none"));
    for (const line of r.bendings) box.append(el("div", "mono", line));
    for (const [title, isEffect] of [["measures", false], ["effects (perceptible steps)", true]]) {
      const shown = data.measures.map((name, j) => [name, r.m[j]])
        .filter(([name, v]) => v !== null && effects.has(name) === isEffect);
      if (!shown.length) continue;
      section(box, title);
      const table = el("table", "kv");
      for (const [name, v] of shown) {
        const tr = el("tr");
        tr.append(el("td", "", name), el("td", "num", isEffect && v > 0 ? `+${fmt(v)}` : fmt(v)));
        table.append(tr);
      }
      box.append(table);
    }
    if (data.flags.length) {
      section(box, "flags");
      box.append(r.flags.length ? el("div", "bad", r.flags.join(", ")) : el("div", "sub", "none"));
    }
  }
  function showTip(i) {
    if (i < 0) { tip.hidden = true; return; }
    describe(rows[i], tip);
    tip.hidden = false;
    const m = svg.getScreenCTM(), box = $("figure").getBoundingClientRect();
    const px = m.a * rows[i].X + m.e - box.left, py = m.d * rows[i].Y + m.f - box.top;
    const w = tip.offsetWidth, h = tip.offsetHeight;
    tip.style.left = `${px + 14 + w > box.width ? Math.max(0, px - 14 - w) : px + 14}px`;
    tip.style.top = `${Math.max(0, Math.min(py + 14, box.height - h))}px`;
  }

  // -- filters
  const hidden = new Set();
  function hideBox(key, text) {
    const label = el("label"), box = el("input");
    box.type = "checkbox";
    box.dataset.hide = key;
    box.addEventListener("change", () => {
      if (box.checked) hidden.add(key); else hidden.delete(key);
      apply();
    });
    label.append(box, ` ${text}`);
    $("hide").append(label);
  }
  hideBox("broken", "broken");
  if (rows.some((r) => r.kind === "failed")) hideBox("failed", "failed");
  for (const flag of data.flags) hideBox(`flag:${flag}`, flag);
  const inputSel = $("input"), colourSel = $("colour"), search = $("search");
  inputSel.append(new Option(`all (${data.inputs.length})`, "-1"));
  data.inputs.forEach((input, k) => {
    const n = rows.filter((r) => r.input === k).length;
    inputSel.append(new Option(`${input.name} (${n})`, String(k)));
  });
  for (const name of data.measures) colourSel.append(new Option(name, name));
  if (!data.measures.length) colourSel.append(new Option("none", ""));
  colourSel.value = data.colour || "";
  const texts = rows.map((r) => [r.id, data.inputs[r.input].path, r.error || "", ...r.bendings,
    ...r.axes.map((a) => a.join(" = "))].join("\n").toLowerCase());

  function visible(r, i, input, words) {
    if (hidden.has("broken") && r.broken) return false;
    if (hidden.has("failed") && r.kind === "failed") return false;
    if (r.flags.some((f) => hidden.has(`flag:${f}`))) return false;
    if (input >= 0 && r.input !== input) return false;
    return words.every((w) => texts[i].includes(w));
  }
  function apply() {
    const input = +inputSel.value, words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    rows.forEach((r, i) => {
      r.v = visible(r, i, input, words);
      nodes[i].style.display = r.v ? "" : "none";
      shown += r.v;
    });
    $("count").textContent = `${shown} of ${rows.length} shown`;
    if (hover >= 0 && !rows[hover].v) { hover = -1; showTip(-1); }
    rings();
  }
  function recolour() {
    const j = data.measures.indexOf(colourSel.value);
    const diverging = effects.has(colourSel.value);
    let lo = Infinity, hi = -Infinity;
    for (const r of rows) {
      const v = j >= 0 ? r.m[j] : null;
      if (r.kind === "ok" && v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    }
    if (diverging && lo <= hi) {  // centred on 0 (no change), symmetric about it
      hi = Math.max(Math.abs(lo), Math.abs(hi)) || 1;
      lo = -hi;
    }
    const colours = diverging ? DIVERGING : VIRIDIS;
    rows.forEach((r, i) => {
      if (r.kind !== "ok") return;
      const v = j >= 0 ? r.m[j] : null;
      const t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
      nodes[i].setAttribute("fill", v === null ? "#aab" : ramp(t, colours));
    });
    bar.style.background = `linear-gradient(to right, ${colours.join(", ")})`;
    $("scale-name").textContent = j >= 0 ? colourSel.value : "no measure";
    $("scale-lo").textContent = lo <= hi ? fmt(lo) : "";
    $("scale-hi").textContent = lo <= hi ? fmt(hi) : "";
  }
  inputSel.addEventListener("change", apply);
  colourSel.addEventListener("change", recolour);
  search.addEventListener("input", apply);

  // -- the legend, the summary and the loadings
  function icon(kind) {
    const s = svgEl("svg", {width: 14, height: 14, "aria-hidden": "true"});
    if (kind === "broken") s.append(svgEl("path", {d: "M3,3L11,11M3,11L11,3", class: "pt broken"}));
    else if (kind === "failed") {
      s.append(svgEl("rect", {x: 2.5, y: 2.5, width: 9, height: 9, class: "pt failed"}));
    } else s.append(svgEl("circle", {cx: 7, cy: 7, r: 5, class: "pt", fill: ramp(.55)}));
    return s;
  }
  const legend = $("legend"), bar = el("span", "bar");
  bar.style.background = `linear-gradient(to right, ${VIRIDIS.join(", ")})`;
  const scale = el("span");
  scale.append(el("span", "", "colour: "), el("b", "", ""), " ", el("span", "", ""), bar,
    el("span", "", ""));
  [scale.children[1].id, scale.children[2].id, scale.children[4].id] =
    ["scale-name", "scale-lo", "scale-hi"];
  legend.append(scale);
  for (const [kind, text] of [["ok", "render"], ["broken", "broken (flagged)"],
    ["failed", "failed (no measures, in the strip)"]]) {
    const item = el("span");
    item.append(icon(kind), text);
    legend.append(item);
  }
  const failed = rows.filter((r) => r.kind === "failed").length;
  const broken = rows.filter((r) => r.kind === "broken").length;
  $("summary").textContent = `${rows.length} renders of ${data.inputs.length} input` +
    `${data.inputs.length === 1 ? "" : "s"}: ${broken} broken, ${failed} failed. ` +
    "Map: principal components of the standardised measures.";
  const head = el("tr");
  head.append(el("th", "", "measure"), el("th", "num", `PC1 ${fmt(100 * data.explained[0])} %`),
    el("th", "num", `PC2 ${fmt(100 * data.explained[1])} %`));
  $("loadings").append(head);
  for (const [name, a, b] of data.loadings) {
    const tr = el("tr");
    tr.append(el("td", "", name), el("td", "num", fmt(a)), el("td", "num", fmt(b)));
    $("loadings").append(tr);
  }

  // -- playing
  let selected = -1, cursor = -1, hover = -1, playing = "";
  function rings() {
    for (const [mark, i] of [[ring, selected], [cursorRing, cursor]]) {
      const on = i >= 0 && rows[i].v;
      mark.setAttribute("visibility", on ? "visible" : "hidden");
      if (!on) continue;
      mark.setAttribute("cx", rows[i].X.toFixed(1));
      mark.setAttribute("cy", rows[i].Y.toFixed(1));
    }
  }
  function now(text, on) {
    $("now").textContent = text;
    $("now").classList.toggle("playing", !!on);
  }
  function play(path, what) {
    playing = what;
    player.src = encoded(path);
    now(`loading ${what}`);
    const started = player.play();
    if (!started) return;
    started.catch((e) => { if (!player.error) now(`${what}: press play (${e.name})`); });
  }
  function choose(i) {
    selected = i; cursor = i;
    const r = rows[i], input = data.inputs[r.input];
    describe(r, $("details"));
    unbent.disabled = !input.unbent;
    unbent.textContent = input.unbent ? `play the unbent ${input.name}` : "no unbent render";
    if (r.audio) play(r.audio, r.id);
    else {
      player.pause();
      player.removeAttribute("src");
      now(`${r.id}: no audio, the render failed`);
    }
    rings();
  }
  function playUnbent() {
    const i = selected >= 0 ? selected : cursor;
    const input = i >= 0 ? data.inputs[rows[i].input] : null;
    if (input && input.unbent) play(input.unbent, `the unbent ${input.name}`);
  }
  player.addEventListener("playing", () => now(`playing ${playing}`, true));
  player.addEventListener("pause", () => { if (!player.error) now(`paused: ${playing}`); });
  player.addEventListener("ended", () => now(`played: ${playing}`));
  player.addEventListener("error", () => {
    if (player.getAttribute("src")) now(`cannot load ${playing}`);
  });
  unbent.addEventListener("click", playUnbent);

  // -- pointer and keys
  function nearest(evt) {
    const m = svg.getScreenCTM();
    if (!m) return -1;
    const X = (evt.clientX - m.e) / m.a, Y = (evt.clientY - m.f) / m.d, reach = 12 / m.a;
    let best = -1, bd = reach * reach;
    rows.forEach((r, i) => {
      if (!r.v) return;
      const d = (r.X - X) ** 2 + (r.Y - Y) ** 2;
      if (d < bd) { bd = d; best = i; }
    });
    return best;
  }
  svg.addEventListener("mousemove", (evt) => {
    const i = nearest(evt);
    if (i !== hover) { hover = i; showTip(i); }
    svg.style.cursor = i >= 0 ? "pointer" : "default";
  });
  svg.addEventListener("mouseleave", () => { hover = -1; showTip(-1); });
  svg.addEventListener("click", (evt) => {
    const i = nearest(evt);
    if (i >= 0) choose(i);
  });
  function step(dx, dy) {
    const order = rows.map((r, i) => i).filter((i) => rows[i].v);
    if (!order.length) return;
    if (cursor < 0 || !rows[cursor].v) { cursor = order[0]; return; }
    const a = rows[cursor];
    let best = -1, score = Infinity;
    for (const i of order) {
      const ex = rows[i].X - a.X, ey = rows[i].Y - a.Y, along = ex * dx + ey * dy;
      if (along <= 0) continue;
      const s = along + 2 * Math.abs(ex * dy - ey * dx);
      if (s < score) { score = s; best = i; }
    }
    if (best >= 0) cursor = best;
  }
  function next(by) {
    const order = rows.map((r, i) => i).filter((i) => rows[i].v);
    if (!order.length) return;
    const k = order.indexOf(cursor);
    cursor = order[k < 0 ? 0 : (k + by + order.length) % order.length];
  }
  const arrows = {ArrowRight: [1, 0], ArrowLeft: [-1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1]};
  svg.addEventListener("keydown", (evt) => {
    if (arrows[evt.key]) step(...arrows[evt.key]);
    else if (evt.key === "n" || evt.key === "p") next(evt.key === "n" ? 1 : -1);
    else if (evt.key === "Enter" || evt.key === " ") {
      if (cursor >= 0 && rows[cursor].v) choose(cursor);
    }
    else if (evt.key === "u") { playUnbent(); return; }
    else if (evt.key === "Escape") { player.pause(); hover = -1; showTip(-1); return; }
    else return;
    evt.preventDefault();
    hover = cursor;
    showTip(cursor);
    rings();
  });
  svg.addEventListener("blur", () => { if (hover === cursor) { hover = -1; showTip(-1); } });

  recolour();
  apply();
})();
