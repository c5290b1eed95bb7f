// What the widgets' front-ends share (gradflow.js, momentum.js). Not a module of its own: no import,
// no export. web_host.esm_text(name) returns this file's text followed by web/<name>.js, so each
// widget is still one ES module, served the same two ways (anywidget's _esm in JupyterLab, a Blob-URL
// import of the text on the static pages, where a relative import between modules would not resolve).
// Every top-level name here starts with `nl` or `NL_`: a widget module must not define those names.
//
//   nlNode / nlHtml   an SVG / HTML element with attributes ("text" sets textContent), appended to parent
//   nlKeepKeys        keys pressed inside the widget do not reach JupyterLab's notebook shortcuts
//   nlHead            the header line: where the data comes from (live / grid) and the grid's note
//   nlMount           the start of a render(): spec, source, a uid, the root element, keys, header
//   nlLegend          a row of legend items, a short line of the given class and its text each
//   nlErrorLine       the line that shows the error trait
//   nlKeepPrevious    a data hook that passes the data drawn before too (the grey dashed curves)
//   nlRoundTrip       controls -> data through the model (kernel or grid shim), timed, one request at a time
//   nlUnpackGrid      live: the precomputed grid the kernel sent (traits grid + grid_meta), unpacked once
//   nlFromGrid        that grid's entry for some controls (undefined outside it): answered without the kernel

const NL_SVGNS = "http://www.w3.org/2000/svg";
const NL_SOURCE_TEXT = { live: "实时计算 (live, kernel)", grid: "预先计算的网格 (precomputed grid, no kernel)" };
const NL_OWN_KEYS = ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown", " ", "Enter"];

function nlNode(tag, attrs, parent, ns = NL_SVGNS) {
  const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  if (parent) parent.appendChild(e);
  return e;
}
const nlHtml = (tag, attrs, parent) => nlNode(tag, attrs, parent, null);

// JupyterLab's notebook takes the keys that bubble out of an output (command mode): a slider would not
// move with the arrow keys. Keys pressed inside `root` stay inside it.
function nlKeepKeys(root) {
  root.addEventListener("keydown", (ev) => {
    if (NL_OWN_KEYS.includes(ev.key) && !ev.shiftKey && !ev.ctrlKey) ev.stopPropagation();
  });
}

let nlInstances = 0;                  // per widget module: each one is imported with its own copy

// The start of a render(): spec and source from the model, a page-unique uid ("P-<n>-<random>", for
// the ids of labels and SVG clip paths), the root <div class=cls data-source=source> in el with the
// keys kept inside, and the header (nlHead). Returns {spec, source, uid, root}.
function nlMount(model, el, cls, prefix) {
  const spec = model.get("spec") || {};
  const source = model.get("source") === "grid" ? "grid" : "live";
  const uid = `${prefix}-${++nlInstances}-${Math.random().toString(36).slice(2, 8)}`;
  const root = nlHtml("div", { class: cls, "data-source": source }, el);
  nlKeepKeys(root);
  nlHead(root, prefix, source, spec.grid_note);
  return { spec, source, uid, root };
}

// <div class="P-head"><span class="P-source P-source-live|grid">…</span><span class="P-note">note</span></div>
// (the note only on the static page: source "grid"), P = prefix.
function nlHead(parent, prefix, source, note) {
  const head = nlHtml("div", { class: `${prefix}-head` }, parent);
  nlHtml("span", { class: `${prefix}-source ${prefix}-source-${source}`, text: NL_SOURCE_TEXT[source] }, head);
  if (source === "grid" && note) nlHtml("span", { class: `${prefix}-note`, text: note }, head);
  return head;
}

// items: [[class of the line, text], ...]
function nlLegend(parent, prefix, items) {
  const legend = nlHtml("div", { class: `${prefix}-legend` }, parent);
  for (const [cls, text] of items) {
    const item = nlHtml("span", { class: `${prefix}-legend-item` }, legend);
    const sw = nlNode("svg", { width: 34, height: 12, "aria-hidden": "true" }, item);
    nlNode("path", { d: "M2,6L32,6", class: cls }, sw);
    nlHtml("span", { text }, item);
  }
  return legend;
}

// <div class="P-error" role="alert"> in parent; returns show(message): the text, and the class
// P-has-error on `marked` (default: parent) while there is one ("" clears both).
function nlErrorLine(parent, prefix, marked = parent) {
  const box = nlHtml("div", { class: `${prefix}-error`, role: "alert" }, parent);
  return (msg) => {
    box.textContent = msg;
    marked.classList.toggle(`${prefix}-has-error`, Boolean(msg));
  };
}

// A data hook that remembers the data drawn before: draw(current, previous), previous = the last
// different data (null at first), for the grey dashed "previous setting".
function nlKeepPrevious(draw) {
  let current = null, previous = null;
  return (d) => {
    if (current && current !== d) previous = current;
    current = d;
    draw(current, previous);
  };
}

// Live widgets whose precomputed grid is cheap bring it along (web_host.WebWidget.live_grid): the trait
// `grid` is base64 of gzipped JSON {"grid": {key: data}} (grid_file.pack), `grid_meta` {order, fixed}.
// Resolves to {order, fixed, grid}, or null (none sent, or no DecompressionStream in this browser).
async function nlUnpackGrid(model) {
  const packed = model.get("grid"), meta = model.get("grid_meta") || {};
  if (!packed || !meta.order || typeof DecompressionStream !== "function") return null;
  const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  const doc = JSON.parse(await new Response(stream).text());
  return { order: meta.order, fixed: meta.fixed || {}, grid: doc.grid || {} };
}

// The key of `controls` in grid g (as web_host.grid_key), or null when a fixed control differs.
function nlGridKey(g, controls) {
  if (!g) return null;
  for (const [n, v] of Object.entries(g.fixed)) if (String(controls[n] ?? v) !== String(v)) return null;
  return g.order.map((n) => String(controls[n])).join("|");
}
function nlFromGrid(g, controls) {
  const key = nlGridKey(g, controls);
  return key === null ? undefined : g.grid[key];
}

// The round trip between the controls and `data`, over the model's five methods. It listens to
// change:data / change:error / change:controls and calls on.data(data), on.error(message) and
// on.controls(controls, own) (own: the change is this round trip's own model.set); `shown`
// ({name: {show(value)}}) are controls whose values follow a change of `controls` (set from Python or
// by the static page's shim). on.data and on.error are called once at the start with the model's
// values. Returns
//   input(changes)  a user's input: the timing starts; controls = the latest (queued or set) + changes
//   send(controls)  model.set("controls") + save_changes. live (a kernel answers): one request at a
//                   time, the latest input queued until the reply; a timer stands in for a reply that
//                   fires no change event (the same data again), after `fallbackMs`
//   settled()       a reply came: el.dataset.lastUpdateMs (input -> the next animation frame after the
//                   redraw), el.dataset.lastAnswer ("grid" or "kernel") and el.dataset.updates, then the
//                   queued request goes out
//   dispose(...els) the listeners off, the timer cleared, the elements given (the widget's root) removed
// A data change and an error message count as replies (an empty error does not).
// Live with a grid (nlUnpackGrid): an input whose state the grid holds is drawn from it at once; the
// controls still go to the kernel (Python's state follows), and its reply for that state is not drawn
// again (nor a late reply for an earlier state).
function nlRoundTrip(model, el, { live, on = {}, shown = {}, fallbackMs = 1000 }) {
  let pendingSince = null;            // performance.now() of the input event not yet drawn
  let inFlight = false, queued = null, fallback = null;
  let own = false;
  let grid = null, answered = null;   // the unpacked grid; the key drawn from it for the current controls
  if (live) nlUnpackGrid(model).then((g) => { grid = g; }).catch((err) => console.warn("normlab grid:", err));
  const drawnFromGrid = () => answered !== null && answered === nlGridKey(grid, model.get("controls") || {});

  function settled(answer = live ? "kernel" : "grid") {
    inFlight = false;
    if (fallback !== null) { clearTimeout(fallback); fallback = null; }
    if (pendingSince !== null) {
      const t0 = pendingSince;
      pendingSince = null;
      requestAnimationFrame(() => {
        el.dataset.lastAnswer = answer;  // who answered: "grid" (no kernel) or "kernel" (tools/bench_widgets.py)
        el.dataset.lastUpdateMs = (performance.now() - t0).toFixed(2);
        el.dataset.updates = String(Number(el.dataset.updates || 0) + 1);
      });
    }
    if (queued) { const q = queued; queued = null; send(q); }
  }

  function send(controls) {
    if (live && inFlight) { queued = controls; return; }
    inFlight = Boolean(live);
    if (inFlight) fallback = setTimeout(settled, fallbackMs);
    own = true;
    try { model.set("controls", controls); } finally { own = false; }
    model.save_changes();
  }

  function input(changes) {
    pendingSince = performance.now();
    const controls = { ...(queued || model.get("controls") || {}), ...changes };
    const entry = live ? nlFromGrid(grid, controls) : undefined;
    if (entry === undefined) { answered = null; send(controls); return; }
    answered = nlGridKey(grid, controls);
    queued = null;
    own = true;
    try { model.set("controls", controls); } finally { own = false; }
    model.save_changes();               // the kernel follows; no reply is waited for
    const message = entry.__error__ || "";
    if (on.error) on.error(message);
    if (!message && on.data) on.data(entry);
    settled("grid");                    // an earlier request's late reply is not drawn (drawnFromGrid)
  }

  const data = () => model.get("data") || {};
  const error = () => model.get("error") || "";
  function onData() {
    if (!drawnFromGrid() && on.data) on.data(data());
    settled();
  }
  function onError() {
    const msg = error();
    if (!drawnFromGrid() && on.error) on.error(msg);
    if (msg) settled();
  }
  function onControls() {
    const c = model.get("controls") || {};
    for (const [name, ctl] of Object.entries(shown)) if (name in c) ctl.show(c[name]);
    if (on.controls) on.controls(c, own);
  }

  model.on("change:data", onData);
  model.on("change:error", onError);
  model.on("change:controls", onControls);
  if (on.data) on.data(data());
  if (on.error) on.error(error());
  return {
    input, send, settled,
    dispose(...els) {
      model.off("change:data", onData);
      model.off("change:error", onError);
      model.off("change:controls", onControls);
      if (fallback !== null) clearTimeout(fallback);
      for (const e of els) e.remove();
    },
  };
}
