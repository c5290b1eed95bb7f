// A toy front-end for the host's tests (tests/test_web_host.py, tests/test_browser_widgets.py):
// one <select>, one <input type=range>, an SVG of bars drawn from data.bars. It follows the same
// contract as the real front-ends (web_host.py): the five model methods only, the source badge,
// the error line and el.dataset.lastUpdateMs.

export default {
  render({ model, el }) {
    const spec = model.get("spec");
    const root = document.createElement("div");
    root.className = "toy";
    const badge = document.createElement("div");
    badge.className = "toy-badge";
    badge.textContent = model.get("source") === "grid" ? "预先计算的网格 (precomputed grid, no kernel)" : "实时计算 (live, kernel)";
    root.appendChild(badge);
    let t0 = null;
    for (const c of spec.controls) {
      const label = document.createElement("label");
      label.textContent = c.label + " ";
      let input;
      if (c.kind === "select") {
        input = document.createElement("select");
        for (const [value, text] of c.options) {
          const o = document.createElement("option");
          o.value = String(value);
          o.textContent = text;
          input.appendChild(o);
        }
      } else {
        input = document.createElement("input");
        input.type = "range";
        input.min = c.min; input.max = c.max; input.step = c.step || 1;
      }
      input.name = c.name;
      input.value = String(model.get("controls")[c.name]);
      input.addEventListener(c.kind === "select" ? "change" : "input", () => {
        t0 = performance.now();
        const value = c.kind === "range" ? Number(input.value) : input.value;
        model.set("controls", { ...model.get("controls"), [c.name]: value });
        model.save_changes();
      });
      label.appendChild(input);
      root.appendChild(label);
    }
    const svgNS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(svgNS, "svg");
    svg.setAttribute("width", "300");
    svg.setAttribute("height", "100");
    root.appendChild(svg);
    const error = document.createElement("div");
    error.className = "toy-error";
    root.appendChild(error);
    el.appendChild(root);
    // JupyterLab's notebook takes the keys that bubble out of an output (command mode): a slider would
    // not move with the arrow keys. Keys pressed inside the widget stay inside it.
    const OWN = ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown", " ", "Enter"];
    const keep = (ev) => { if (OWN.includes(ev.key) && !ev.shiftKey && !ev.ctrlKey) ev.stopPropagation(); };
    root.addEventListener("keydown", keep);

    function draw() {
      const data = model.get("data");
      svg.replaceChildren();
      (data.bars || []).forEach((v, i) => {
        const r = document.createElementNS(svgNS, "rect");
        r.setAttribute("x", String(i * 20));
        r.setAttribute("y", String(100 - v * 10));
        r.setAttribute("width", "16");
        r.setAttribute("height", String(v * 10));
        r.setAttribute("fill", data.color || "gray");
        r.dataset.value = String(v);
        svg.appendChild(r);
      });
      svg.dataset.last = String((data.bars || []).at(-1));
      if (t0 !== null) {
        const start = t0;
        requestAnimationFrame(() => { el.dataset.lastUpdateMs = (performance.now() - start).toFixed(2); });
        t0 = null;
      }
    }
    const showError = () => { error.textContent = model.get("error"); };
    model.on("change:data", draw);
    model.on("change:error", showError);
    draw();
    showError();
    return () => { model.off("change:data", draw); model.off("change:error", showError); };
  },
};
