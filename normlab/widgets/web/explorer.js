// The axes explorer's browser front-end (issue 17): a tensor drawn as its slices side by side,
// (N, C, H·W) for images or (B, S, E) for text; the selected cell's group lit up, walls between
// groups, and a panel with the torch line behind the statistics and the selected group's numbers.
// Plain DOM (a grid of divs per slice), no imports, nothing fetched. The same module runs in
// JupyterLab (source "live": the kernel computes `data`) and in the book / slides (source "grid":
// a model shim looks `data` up in a precomputed grid). It uses only model.get / set / save_changes /
// on / off.
//
// controls {layout, norm, shape: "4,6,3,3", num_groups (0 unless GroupNorm), cell: "2,3,1,1", seed}
//          (the grid key is spec.control_order = layout|norm|shape|num_groups; cell and seed are not in it)
// data     {layout, shape, blocks: [slices, rows, cols], ids: [group per element], n_groups, group_size,
//           stats: {mean: [per group], var: [...]} | {rms: [...]}, lines, module, x, y, title, sizes}
// spec     {title, control_order, controls: [layout, norm, num_groups (selects), one range per axis:
//           {name, label, min, max, grid_max, layout, part_of: "shape", index}], default_shape, axes,
//           channel_axis, stat_names, text}
//
// The selection lives in the browser: a click, the arrow keys (and Enter / Space on a cell) move it,
// and every cell whose data-group equals the selected one gets the class "same". Each cell carries
// data-cell="k,r,c" (slice, row, column: column = h·W + w for images) and data-group="g" for the
// browser tests; el.dataset.key is the grid key of the controls shown (controls depend on each
// other: a new layout starts from its default shape, G follows the channel count). el.dataset.lastUpdateMs is the time from the input event to the next animation frame
// after the redraw (tools/bench_* read it).
//
// A norm select with one option (AxesExplorer(norms=("batchnorm",))) is shown disabled; without
// "groupnorm" among its options the G select is left out.
//
// Redraws stay within a frame (tools/bench_widgets.py): the cells, rows and slices are kept and reused
// (a new layout or size adds or removes only what differs; one click listener on the board), the
// width comes from a ResizeObserver (nothing is read from the layout while drawing), the sliders of
// each layout are built once, and the view keeps the tallest height it has had (an explicit height with
// `contain: size layout`, reset when the width changes): a smaller picture leaves space below the widget
// instead of moving the rest of the page, and no change inside the widget reaches the page's layout
// (in the book, either made the browser walk the whole page on every redraw: ~10 ms per frame).

const SOURCE_TEXT = { live: "实时计算 (live, kernel)", grid: "预先计算的网格 (precomputed grid, no kernel)" };
const KEYS = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
let instances = 0;

function html(tag, attrs, parent) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v;
    else if (k === "cls") e.className = v;
    else e.setAttribute(k, v);
  }
  if (parent) parent.appendChild(e);
  return e;
}

const ints = (text) => String(text || "").split(",").filter((s) => s !== "").map(Number);
const fmt = (v) => (typeof v === "number" && Number.isFinite(v) ? String(Number(v.toPrecision(4))) : "—");
const setText = (e, text) => { if (e.textContent !== text) e.textContent = text; };
const divisors = (n) => Array.from({ length: n }, (_, i) => i + 1).filter((g) => n % g === 0);

export default {
  render({ model, el }) {
    const spec = model.get("spec");
    const uid = `nl-ax-${++instances}`;
    const T = spec.text || {};
    const root = html("div", { cls: "nl-explorer" }, el);

    // JupyterLab's notebook takes the keys that bubble out of an output (command mode): a slider or a
    // cell would not move with the arrow keys. Keys pressed inside the widget stay inside it.
    const OWN_KEYS = ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown", " ", "Enter"];
    root.addEventListener("keydown", (ev) => {
      if (OWN_KEYS.includes(ev.key) && !ev.shiftKey && !ev.ctrlKey) ev.stopPropagation();
    });

    // --- header: title and where the data comes from
    const head = html("div", { cls: "nl-ax-head" }, root);
    html("span", { cls: "nl-ax-heading", text: spec.title || "" }, head);
    const source = html("span", { cls: "nl-ax-source" }, head);

    // --- controls (native elements with labels: keyboard-operable)
    const controlsBox = html("div", { cls: "nl-ax-controls" }, root);
    const def = Object.fromEntries((spec.controls || []).map((c) => [c.name, c]));
    function makeSelect(name, options) {
      const wrap = html("div", { cls: "nl-ax-control" }, controlsBox);
      const id = `${uid}-${name}`;
      html("label", { for: id, text: def[name] ? def[name].label : name }, wrap);
      const s = html("select", { id, name }, wrap);
      for (const [value, text] of options) html("option", { value: String(value), text }, s);
      return s;
    }
    const layoutSel = makeSelect("layout", def.layout.options);
    const normSel = makeSelect("norm", def.norm.options);
    const oneNorm = def.norm.options.length < 2;         // a page that offers one norm: shown, not a choice
    normSel.disabled = oneNorm;
    const groupSel = makeSelect("num_groups", []);
    const hasGroups = !!def.num_groups && def.norm.options.some(([n]) => n === "groupnorm");
    groupSel.parentNode.hidden = !hasGroups;
    const groupNote = html("span", { cls: "nl-ax-note", text: T.no_g || "" }, groupSel.parentNode);
    const dimsBox = html("div", { cls: "nl-ax-dims", role: "group", "aria-label": def.shape ? def.shape.label : "shape" },
                         controlsBox);
    const resample = html("button", { type: "button", cls: "nl-ax-resample", text: T.resample || "resample" },
                          controlsBox);
    let sliders = [], slidersFor = null;
    const sliderSets = {};               // layout -> its sliders, built once (kept aside while another layout shows)

    const error = html("div", { cls: "nl-ax-error", role: "alert" }, root);
    const title = html("div", { cls: "nl-ax-title" }, root);
    const board = html("div", { cls: "nl-ax-board", role: "grid", "aria-label": spec.title || "axes explorer" }, root);
    html("div", { cls: "nl-ax-hint", text: T.keys || "" }, root);
    const panel = html("div", { cls: "nl-ax-panel", "aria-live": "polite" }, root);

    // --- state: the drawn data, the cells, the selection [slice, row, col]
    let drawn = null, cells = [], blocks = null, shapeDrawn = null, layoutDrawn = null, sel = [0, 0, 0];
    let selCell = null;                  // the cell element marked selected
    let t0 = null;                       // input event time, until the next frame after the redraw
    let waiting = false;                 // a data change is expected (a control moved)

    const controls = () => model.get("controls") || {};
    const src = () => model.get("source") || "live";
    const dimsOf = (layout) => (spec.controls || []).filter((c) => c.part_of === "shape" && c.layout === layout)
      .sort((a, b) => a.index - b.index);
    const keyOf = (c) => (spec.control_order || []).map((n) => String(c[n])).join("|");
    const channelsOf = (layout, shape) => shape[(spec.channel_axis || {})[layout] ?? 1];

    function finish(answer = src() === "live" ? "kernel" : "grid") {
      if (t0 === null) return;
      const start = t0;
      t0 = null;
      requestAnimationFrame(() => {
        el.dataset.lastAnswer = answer;    // who answered: "grid" (no kernel) or "kernel" (tools/bench_widgets.py)
        el.dataset.lastUpdateMs = (performance.now() - start).toFixed(2);
      });
    }

    // Live with the precomputed grid the kernel sent (nlUnpackGrid): a state the grid holds is drawn from
    // it at once; the kernel still gets the controls, and its reply for that state is not drawn again.
    let grid = null, answered = null;
    if (src() === "live") nlUnpackGrid(model).then((g) => { grid = g; }).catch((err) => console.warn("normlab grid:", err));
    const drawnFromGrid = () => answered !== null && answered === nlGridKey(grid, controls());

    let own = false;                     // our own model.set("controls"): the controls already show it
    function send(changes, expectData = true) {
      own = true;
      try { model.set("controls", { ...controls(), ...changes }); } finally { own = false; }
      if (Object.keys(changes).some((k) => k !== "cell" && k !== "seed")) syncControls();
      waiting = expectData;
      model.save_changes();
      if (!expectData) return;
      const entry = src() === "live" ? nlFromGrid(grid, controls()) : undefined;
      answered = entry === undefined ? null : nlGridKey(grid, controls());
      if (entry === undefined) return;
      showError(entry.__error__ || "");
      waiting = false;
      finish("grid");
      if (!entry.__error__) onData(entry);
    }

    // --- controls <- model.controls
    function buildSliders(layout, shape) {
      if (sliderSets[layout]) {            // built before: put them back in place of the other layout's
        sliders = sliderSets[layout];
        dimsBox.replaceChildren(...sliders.map((s) => s.wrap));
        slidersFor = layout;
        return;
      }
      dimsBox.replaceChildren();
      sliders = sliderSets[layout] = dimsOf(layout).map((d, i) => {
        const wrap = html("div", { cls: "nl-ax-control nl-ax-dim" }, dimsBox);
        const id = `${uid}-dim-${d.name}`;
        html("label", { for: id, text: d.label }, wrap);
        const max = src() === "grid" && d.grid_max ? d.grid_max : d.max;
        const min = src() === "grid" && d.grid_min ? d.grid_min : d.min;
        const input = html("input", { id, type: "range", name: d.name, min, max, step: 1 }, wrap);
        const out = html("output", { for: id, cls: "nl-ax-value" }, wrap);
        input.value = String(shape[i]);
        out.textContent = String(shape[i]);
        input.addEventListener("input", () => {
          t0 = performance.now();
          out.textContent = input.value;
          const next = sliders.map((s) => Number(s.input.value));
          const changes = { shape: next.join(","), cell: clampCell(layout, next).join(",") };
          if (controls().norm === "groupnorm") changes.num_groups = pickGroups(channelsOf(layout, next));
          send(changes);
        });
        return { input, out, wrap };
      });
      slidersFor = layout;
    }

    let wantG = Number(controls().num_groups) || 2;   // the learner's G, kept while another norm is shown
    function pickGroups(channels, want) {
      const g = Number(want ?? wantG);
      const ok = divisors(channels);
      return ok.includes(g) ? g : ok.includes(2) ? 2 : 1;
    }

    function clampCell(layout, shape) {
      const cell = ints(controls().cell);
      return shape.map((s, i) => (cell.length === shape.length ? Math.min(Math.max(cell[i], 0), s - 1) : Math.floor(s / 2)));
    }

    function syncControls() {
      const c = controls();
      const shape = ints(c.shape);
      layoutSel.value = c.layout;
      normSel.value = c.norm;
      if (slidersFor !== c.layout || sliders.length !== shape.length) buildSliders(c.layout, shape);
      sliders.forEach((s, i) => { s.input.value = String(shape[i]); s.out.textContent = String(shape[i]); });
      if (hasGroups) {
        const options = divisors(channelsOf(c.layout, shape));
        if (c.norm === "groupnorm" && Number(c.num_groups) > 0) wantG = Number(c.num_groups);
        const keep = c.norm === "groupnorm" ? Number(c.num_groups) : wantG;
        if (groupSel.dataset.options !== options.join(",")) {
          groupSel.replaceChildren(...options.map((g) => html("option", { value: String(g), text: String(g) })));
          groupSel.dataset.options = options.join(",");
        }
        groupSel.value = String(options.includes(keep) ? keep : options.includes(2) ? 2 : 1);
        groupSel.disabled = c.norm !== "groupnorm";
        groupNote.hidden = c.norm === "groupnorm";
      }
      resample.hidden = src() !== "live";
      setText(source, SOURCE_TEXT[src()] || src());
      if (source.className !== `nl-ax-source nl-ax-source-${src()}`) source.className = `nl-ax-source nl-ax-source-${src()}`;
      el.dataset.key = keyOf(c);          // the grid key of the controls shown (browser tests)
    }

    layoutSel.addEventListener("change", () => {
      t0 = performance.now();
      const layout = layoutSel.value;
      const shape = (spec.default_shape || {})[layout];
      send({ layout, shape: shape.join(","), cell: shape.map((s) => Math.floor(s / 2)).join(","),
             num_groups: controls().norm === "groupnorm" ? pickGroups(channelsOf(layout, shape), 2) : 0 });
    });
    normSel.addEventListener("change", () => {
      if (oneNorm) return;
      t0 = performance.now();
      const c = controls();
      const norm = normSel.value;
      send({ norm, num_groups: norm === "groupnorm" ? pickGroups(channelsOf(c.layout, ints(c.shape))) : 0 });
    });
    groupSel.addEventListener("change", () => {
      const c = controls();
      const g = Number(groupSel.value);
      if (c.norm !== "groupnorm" || !divisors(channelsOf(c.layout, ints(c.shape))).includes(g)) {
        syncControls();                  // G belongs to GroupNorm and must divide the channels
        return;
      }
      t0 = performance.now();
      wantG = g;
      send({ num_groups: g });
    });
    resample.addEventListener("click", () => {
      t0 = performance.now();
      send({ seed: Number(controls().seed || 0) + 1 });
    });

    // --- the picture: slices of rows of cells, kept between redraws (see the header)
    const slices = [];                   // {el, label, rowLabel, grid, colLabel, rows: [{el, cells: [cell]}]}
    function makeSlice() {
      const slice = html("div", { cls: "nl-ax-slice", role: "rowgroup" }, board);
      const label = html("div", { cls: "nl-ax-slice-label" }, slice);
      const body = html("div", { cls: "nl-ax-slice-body" }, slice);
      const rowLabel = html("div", { cls: "nl-ax-rowlabel", "aria-hidden": "true" }, body);
      const grid = html("div", { cls: "nl-ax-cells" }, body);
      const colLabel = html("div", { cls: "nl-ax-collabel" }, slice);
      return { el: slice, label, rowLabel, grid, colLabel, rows: [] };
    }

    // cells 18-28 px: all slices in one row where the widget's width allows (else they wrap)
    let rootWidth = null;                // root.clientWidth, kept by the ResizeObserver below
    function cellPx(n, cols) {
      if (rootWidth === null) rootWidth = root.clientWidth;       // once, before the first picture
      const width = Math.max(rootWidth || 0, 600) - 40;
      return Math.max(18, Math.min(28, Math.floor((width - 36 - (n - 1) * 18 - n * 12) / (n * cols)) - 2));
    }
    function sizeCells() {
      if (!drawn) return;
      const px = `${cellPx(drawn.blocks[0], drawn.blocks[2])}px`;
      if (board.style.getPropertyValue("--nl-ax-cell") !== px) board.style.setProperty("--nl-ax-cell", px);
    }

    function build(data) {
      const [n, rows, cols] = data.blocks;
      const axes = (spec.axes || {})[data.layout] || ["N", "C", "H·W"];
      const px = `${cellPx(n, cols)}px`;
      if (board.style.getPropertyValue("--nl-ax-cell") !== px) board.style.setProperty("--nl-ax-cell", px);
      while (slices.length > n) slices.pop().el.remove();
      while (slices.length < n) slices.push(makeSlice());
      cells = new Array(n * rows * cols);
      const w = data.layout === "image" ? data.shape[3] : 1;
      slices.forEach((s, k) => {
        setText(s.label, `${axes[0].toLowerCase()}=${k}`);
        setText(s.rowLabel, `${axes[1]} ↓`);
        setText(s.colLabel, `${axes[2]} →`);
        while (s.rows.length > rows) s.rows.pop().el.remove();
        while (s.rows.length < rows) s.rows.push({ el: html("div", { cls: "nl-ax-row", role: "row" }, s.grid), cells: [] });
        s.rows.forEach((row, r) => {
          while (row.cells.length > cols) row.cells.pop().remove();
          while (row.cells.length < cols) {
            row.cells.push(html("div", { cls: "nl-ax-cell", role: "gridcell", tabindex: "-1", "aria-selected": "false" },
                                row.el));
          }
          row.cells.forEach((cell, c) => {
            const at = `${k},${r},${c}`;
            if (cell.getAttribute("data-cell") !== at) cell.setAttribute("data-cell", at);
            cell.classList.toggle("nl-ax-hrow", w > 1 && c > 0 && c % w === 0);   // a new image row h starts
            cells[(k * rows + r) * cols + c] = cell;
          });
        });
      });
      blocks = data.blocks.join(",");
      shapeDrawn = data.shape.join(",");
      layoutDrawn = data.layout;
    }
    board.addEventListener("click", (ev) => {
      const cell = ev.target.closest ? ev.target.closest(".nl-ax-cell") : null;
      if (!cell || !drawn || !cell.dataset.cell) return;
      t0 = performance.now();
      choose(cell.dataset.cell.split(",").map(Number), true);
    });

    function paint(data) {
      if (blocks !== data.blocks.join(",") || shapeDrawn !== data.shape.join(",") || layoutDrawn !== data.layout) build(data);
      const [, rows, cols] = data.blocks;
      const ids = data.ids;
      cells.forEach((cell, i) => {
        const g = ids[i];
        if (cell.dataset.group !== String(g)) cell.dataset.group = String(g);
        const c = i % cols, r = Math.floor(i / cols) % rows;
        cell.classList.toggle("nl-ax-wall-r", c + 1 < cols && ids[i + 1] !== g);
        cell.classList.toggle("nl-ax-wall-b", r + 1 < rows && ids[i + cols] !== g);
      });
      setText(title, data.title || "");
      drawn = data;
    }

    function cellLabel(data, k, r, c) {           // "n=1, c=2, h=0, w=1" or "b=1, s=2, e=3"
      if (data.layout === "image") {
        const w = data.shape[3];
        return `n=${k}, c=${r}, h=${Math.floor(c / w)}, w=${c % w}`;
      }
      return `b=${k}, s=${r}, e=${c}`;
    }

    function toModelCell(data, [k, r, c]) {
      return data.layout === "image" ? [k, r, Math.floor(c / data.shape[3]), c % data.shape[3]] : [k, r, c];
    }

    function fromModelCell(data) {
      const cell = ints(controls().cell);
      const [n, rows, cols] = data.blocks;
      if (cell.length !== data.shape.length) return [Math.floor(n / 2), Math.floor(rows / 2), Math.floor(cols / 2)];
      const col = data.layout === "image" ? cell[2] * data.shape[3] + cell[3] : cell[2];
      return [Math.min(cell[0], n - 1), Math.min(cell[1], rows - 1), Math.min(col, cols - 1)];
    }

    function highlight() {
      const data = drawn;
      if (!data) return;
      const [, rows, cols] = data.blocks;
      const idx = (sel[0] * rows + sel[1]) * cols + sel[2];
      const g = data.ids[idx];
      cells.forEach((cell, i) => cell.classList.toggle("same", data.ids[i] === g));
      const cell = cells[idx];
      if (selCell !== cell) {
        if (selCell) {
          selCell.classList.remove("selected");
          selCell.setAttribute("aria-selected", "false");
          selCell.tabIndex = -1;
          selCell.removeAttribute("title");
        }
        cell.classList.add("selected");
        cell.setAttribute("aria-selected", "true");
        cell.tabIndex = 0;
        selCell = cell;
      }
      const x = data.x ? data.x[idx] : undefined, y = data.y ? data.y[idx] : undefined;
      cell.title = `(${cellLabel(data, ...sel)}) x = ${fmt(x)} → y = ${fmt(y)}`;
      board.dataset.selectedGroup = String(g);
      board.dataset.selected = sel.join(",");
      panelFor(data, idx, g, x, y);
    }

    function panelFor(data, idx, g, x, y) {
      panel.replaceChildren();
      const line1 = html("div", {}, panel);
      html("span", { cls: "nl-ax-key", text: `${T.module || "layer"}：` }, line1);
      html("code", { text: data.module }, line1);
      html("span", { cls: "nl-ax-sizes", text: `  (${data.sizes})` }, line1);
      const line2 = html("div", {}, panel);
      html("span", { cls: "nl-ax-key", text: `${T.cell || "cell"}：` }, line2);
      html("span", { text: `(${cellLabel(data, ...sel)})  x = ${fmt(x)} → y = ${fmt(y)}` }, line2);
      const line3 = html("div", {}, panel);
      html("span", { cls: "nl-ax-key", text: `${T.group || "group"}：` }, line3);
      html("b", { text: String(g) }, line3);
      const [before, after] = (T.groups || "（共 {n} 组 groups）").split("{n}");
      html("span", { text: before }, line3);
      html("b", { cls: "nl-ax-n", text: String(data.n_groups) }, line3);
      html("span", { text: `${after}；${T.size || "m"} = ` }, line3);
      html("b", { cls: "nl-ax-m", text: String(data.group_size) }, line3);
      const table = html("table", { cls: "nl-ax-stats" }, panel);
      const headRow = html("tr", {}, html("thead", {}, table));
      for (const h of [T.stats || "statistic", "", T.code || "code"]) html("th", { text: h }, headRow);
      const tbody = html("tbody", {}, table);
      for (const [k, values] of Object.entries(data.stats || {})) {
        const tr = html("tr", { "data-stat": k }, tbody);
        html("td", { text: (spec.stat_names || {})[k] || k }, tr);
        html("td", { cls: "nl-ax-num", text: fmt(values[g]) }, tr);
        html("td", {}, tr).appendChild(html("code", { text: (data.lines || {})[k] || "" }));
      }
    }

    function choose(next, sync) {
      if (!drawn) return;
      sel = next;
      highlight();
      finish();
      if (sync) send({ cell: toModelCell(drawn, sel).join(",") }, false);
    }

    board.addEventListener("keydown", (ev) => {
      if (!drawn) return;
      const [n, rows, cols] = drawn.blocks;
      if (ev.key === "Enter" || ev.key === " ") {
        const target = ev.target.closest ? ev.target.closest(".nl-ax-cell") : null;
        if (!target) return;
        ev.preventDefault();
        t0 = performance.now();
        choose(target.dataset.cell.split(",").map(Number), true);
        return;
      }
      const step = KEYS[ev.key];
      if (!step) return;
      ev.preventDefault();
      t0 = performance.now();
      let [k, r, c] = sel;
      r += step[0];
      c += step[1];
      if (c < 0) { if (k > 0) { k -= 1; c = cols - 1; } else c = 0; }   // left/right cross into the next slice
      if (c >= cols) { if (k < n - 1) { k += 1; c = 0; } else c = cols - 1; }
      r = Math.min(Math.max(r, 0), rows - 1);
      choose([k, r, c], true);
      const i = (k * rows + r) * cols + c;
      cells[i].focus({ preventScroll: false });
    });

    // --- model events
    function onData(data) {
      if (!data || !data.blocks) return;
      const next = fromModelCell(data);
      if (data !== drawn || next.join(",") !== sel.join(",")) {
        if (data !== drawn) paint(data);
        sel = next;
        highlight();
      }
      board.classList.remove("nl-ax-stale");
      waiting = false;
      finish();
    }
    function onControls() {
      if (own) return;
      syncControls();
      if (drawn) { sel = fromModelCell(drawn); highlight(); }
    }
    function showError(msg) {
      error.textContent = msg;
      board.classList.toggle("nl-ax-stale", msg !== "");
    }
    function onError() {
      const msg = model.get("error") || "";
      if (!drawnFromGrid()) showError(msg);
      if (msg && waiting) { waiting = false; finish(); }
    }
    function onModelData() {
      if (drawnFromGrid()) { waiting = false; finish(); return; }     // drawn from the grid already
      onData(model.get("data"));
    }
    function onSource() { syncControls(); }

    // The width (cell size) and the height the view keeps (see the header), after each layout. The view
    // gets an explicit height and `contain: size layout`: a change inside it is laid out and repainted
    // there, not through the page's layout (which made the browser walk the whole page on each redraw).
    let reserved = 0, reset = false;
    const resized = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
      const width = root.clientWidth, height = root.offsetHeight;   // the root's own size (the view does not stretch it)
      if (width !== rootWidth) {         // a new width: new cell sizes in the next frame (not inside this
        rootWidth = width;               // callback: a size change here would loop), and a new height to keep
        requestAnimationFrame(() => { sizeCells(); reset = true; });
      }
      if (height > 0 && (height > reserved || (reset && height !== reserved))) {
        reserved = height;
        reset = false;
        el.style.height = `${height}px`;
        el.style.contain = "size layout";
      }
    }) : null;
    if (resized) resized.observe(root);

    model.on("change:data", onModelData);
    model.on("change:controls", onControls);
    model.on("change:error", onError);
    model.on("change:source", onSource);
    syncControls();
    onData(model.get("data"));
    onError();
    return () => {
      if (resized) resized.disconnect();
      el.style.height = "";
      el.style.contain = "";
      model.off("change:data", onModelData);
      model.off("change:controls", onControls);
      model.off("change:error", onError);
      model.off("change:source", onSource);
    };
  },
};
