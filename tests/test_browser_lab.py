"""JupyterLab in a real browser: one JupyterLab server and ONE JupyterLab page for the whole module
(the ``lab`` fixture is per worker and a module runs on one worker; every notebook is opened from the
file browser of the page loaded once, as a learner opens the next lesson: a JupyterLab page load cost
~3.5 s of CPU, and five of them with seven kernels made this module the run's longest, issue 27):

* run the first notebook (00, with the toy widget and a 先想一想 choice after its cells: one kernel), see
  the Chinese glyphs and the figure;
* the course's widgets through the kernel (the helpers come from tests/test_browser_widgets.py): a
  control change goes to the kernel and the front-end redraws what normlab computes (the explorer in 03
  up to its cell; GradFlow in 01's learner copy, after the learner's Run All and pick);
* a learner opens an exported lesson: it stays saved; a 先想一想 choice goes through the kernel; the
  explorer is never squeezed into JupyterLab's scrolled output; the learner copy asks before it shows.

Cost: one page load, five kernels (two of them never run a cell), ~60 s of CPU.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from normlab.course import predictions as P
from normlab.course.kernelmeta import kernel_metadata
from test_browser_book import GLYPH_CHECK
from test_browser_widgets import (DRAWN, GRID_BADGE, LIST_CONTROLS, LIVE_BADGE, TOY_CELL, drawn_explorer,
                                  drawn_gradflow, grid_groups, watch)

ROOT = Path(__file__).resolve().parent.parent
# The notebooks whose widgets the course leans on: the axes explorer and the gradient-flow lab.

# A fingerprint of what the kernel drew in the output area that holds the control: its images
# (an ipywidgets Image gets a new blob URL only when the kernel sends new PNG bytes) and its HTML
# panels. Slider readouts are left out on purpose: the browser updates them by itself, so they
# change even when the kernel never answers.
OUTPUT_FINGERPRINT = """(area) => Array.from(area.querySelectorAll('img, .widget-html-content'))
  .map(e => e.tagName === 'IMG' ? e.src + '#' + e.naturalWidth : e.textContent).join('|')"""


CURRENT = ".jp-NotebookPanel:not(.lm-mod-hidden)"       # the notebook of the current tab (the others stay open)


def current(page):
    return page.locator(CURRENT)


def run_all(page, lab, name: str) -> None:
    """Open ``name`` from the file browser (open_from_file_browser) and Run All, until every cell ran."""
    open_from_file_browser(page, lab, name)
    prompts = f"document.querySelectorAll('{CURRENT} .jp-CodeCell .jp-InputPrompt')"
    started = f"""() => Array.from({prompts}).some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))"""
    finished = f"""() => Array.from({prompts})
        .every(p => /\\[\\d+\\]/.test(p.textContent) || !p.textContent.trim())"""   # blank: a folded cell (setup)
    for attempt in range(3):  # a Run All sent while the kernel is still settling can be dropped
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
        try:
            page.wait_for_function(started, timeout=10000)
            break
        except Exception:  # noqa: BLE001
            continue
    try:
        page.wait_for_function(finished, timeout=180000)
    except Exception as err:  # noqa: BLE001
        page.screenshot(path=str(ROOT / "build" / "artifacts" / f"lab_{name}_stuck.png"))
        raise AssertionError(f"{name}: Run All did not finish") from err


def errors_in(page) -> list[str]:
    """Error outputs in any open notebook (the earlier tabs' too)."""
    return page.evaluate("""() => Array.from(document.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]')).map(e => e.textContent.slice(0, 300))""")


@pytest.fixture(scope="module")
def lab_page(browser, lab):
    """The module's one JupyterLab page (a workspace of its own, reset: no tab of an earlier run), with its
    problems (console errors, page errors, failed requests, requests leaving 127.0.0.1). Every notebook
    the tests open is written before the page loads (the file browser lists it at once)."""
    write_notebooks(lab)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems = watch(page)
    page.goto(f"{lab['base']}/lab/workspaces/normlab-tests?reset&token={lab['token']}")
    page.wait_for_selector(".jp-DirListing-item", timeout=60000)
    yield page, problems
    page.close()
    assert not [p for p in problems if p.startswith("network")], problems


def write_notebooks(lab) -> None:
    """zz_00_toy (first_notebook_and_toy), zz_03_open (lab03), zz_old_metadata (the saved-lesson control)
    and zz_prompts (first_prompts_notebook) in the server's folder."""
    first_notebook_and_toy(lab)
    lesson_03_up_to_the_explorer(lab)
    old_metadata_copy(lab)
    first_prompts_notebook(lab["dir"])


TOY_STORE = "predictions 99.json"       # the toy's guesses, in the server's folder (not the tester's ~/.normlab)
TOY_KEY = ("01", "rezero-std")          # a prompt no other notebook of the page shows (the lock is page-wide)


def first_notebook_and_toy(lab) -> None:
    """00_course_map as exported, then the host alone: anywidget loads the toy module, beside it a 先想一想
    choice and its answer fold (marked as the export marks it)."""
    import nbformat

    nb = nbformat.read(lab["dir"] / "00_course_map.ipynb", 4)
    store = lab["dir"] / TOY_STORE
    key = ".".join(TOY_KEY)
    nb.cells += [
        nbformat.v4.new_code_cell(f"import os\nos.environ['NORMLAB_PREDICTIONS'] = {str(store)!r}\n"
                                  f'from normlab.widgets import predict\npredict.ask("{TOY_KEY[0]}", "{TOY_KEY[1]}")'),
        nbformat.v4.new_markdown_cell(f"<details><summary>答案 (answer){P.answer_marker(key)}</summary>\n\n"
                                      f"{key} 的答案\n\n</details>"),
        nbformat.v4.new_code_cell(TOY_CELL)]
    nb.cells = [nbformat.from_dict({**c, "id": f"t{i}"}) for i, c in enumerate(nb.cells)]
    nbformat.write(nb, lab["dir"] / "zz_00_toy.ipynb")


def run_once(lab_page, lab, name: str, store: str, width: int, height: int) -> dict:
    """``name`` run (Run All) in the module's page at width x height, its guesses file ``store`` (in the
    server's folder) not there before: {"page", "store"}."""
    page, _ = lab_page
    (lab["dir"] / store).unlink(missing_ok=True)
    page.set_viewport_size({"width": width, "height": height})
    run_all(page, lab, name)
    return {"page": page, "store": lab["dir"] / store}


@pytest.fixture(scope="module")
def lab00(lab_page, lab):
    """zz_00_toy run once, at 1400x1000."""
    return run_once(lab_page, lab, "zz_00_toy", TOY_STORE, 1400, 1000)


def test_first_notebook_runs_in_jupyterlab_with_chinese_glyphs(lab00, artifacts):
    """00's cells (and the toy's after them) run in JupyterLab without an error; its figure is drawn; the
    Chinese text renders as glyphs."""
    page = lab00["page"]
    show_tab(page, "zz_00_toy")
    assert not errors_in(page)
    assert current(page).locator(".jp-OutputArea-output img").count() >= 1  # the figure was drawn
    assert page.evaluate(GLYPH_CHECK)
    page.screenshot(path=str(artifacts / "lab_00_course_map.png"))


# --- JupyterLab: the same front-end, through the kernel --------------------------------------------

LAB_SETTINGS = {"gradflow": dict(depth=32, wiring="plain", norm="none")}   # 01's GradFlow(...) cell


def live_view(page, call: str = ""):
    """The output area that holds an anywidget front-end (its native controls), in the current notebook
    (``call``: in the code cell whose source holds it, e.g. "GradFlow(")."""
    cells = current(page).locator(".jp-CodeCell", has=page.locator(".cm-content", has_text=call)) if call else current(page)
    view = cells.locator(".jp-OutputArea-output:has(select)").first
    view.wait_for(timeout=30000)
    view.scroll_into_view_if_needed()
    return view


def change_live_control(page, name: str, widget: str, artifacts: Path, call: str = "") -> None:
    """Pick another option of the widget's first <select>; the picture must change to what normlab
    computes for the new state (KERNEL_ANSWER: the kernel's, or the grid it sent, issue 36)."""
    view = live_view(page, call)
    page.wait_for_timeout(500)
    page.screenshot(path=str(artifacts / f"widgets_lab_{name}_before.png"))
    assert LIVE_BADGE in view.text_content(), f"{name}: the widget does not say {LIVE_BADGE}"
    assert GRID_BADGE not in view.text_content()
    before = view.evaluate(DRAWN[widget])
    assert any(before.values()), f"{name}: the front-end drew nothing the test can read: {before}"
    select = view.locator("select").first
    current = select.input_value()
    target = next(v for v in select.evaluate("s => Array.from(s.options).map(o => o.value)") if v != current)
    select.select_option(target)
    page.wait_for_function(f"([el, before]) => JSON.stringify(({DRAWN[widget]})(el)) !== JSON.stringify(before)",
                           arg=[view.element_handle(), before], timeout=30000)
    page.wait_for_selector(".jp-StatusBar-TextItem:has-text('| Idle')", timeout=60000)
    page.wait_for_timeout(200)
    page.screenshot(path=str(artifacts / f"widgets_lab_{name}_after.png"))
    assert not errors_in(page), errors_in(page)
    assert LIVE_BADGE in view.text_content()
    if widget in KERNEL_ANSWER:
        KERNEL_ANSWER[widget](view)
    slider_moves_with_arrow_keys(page, view, name, widget)


def slider_moves_with_arrow_keys(page, view, name: str, widget: str) -> None:
    """Keyboard-operable in JupyterLab too: an arrow key on a focused slider moves it and the kernel
    redraws. (The notebook takes the keys that bubble out of an output in command mode: a front-end
    must keep its keys, ``keydown`` -> ``stopPropagation()``.)"""
    slider = view.locator("input[type=range]").first
    before_value, before = slider.input_value(), view.evaluate(DRAWN[widget])
    slider.focus()
    key = "ArrowLeft" if before_value == slider.get_attribute("max") else "ArrowRight"
    page.keyboard.press(key)
    page.wait_for_timeout(300)
    assert slider.input_value() != before_value, f"{name}: {key} on the slider did not move it in JupyterLab"
    page.wait_for_function(f"([el, before]) => JSON.stringify(({DRAWN[widget]})(el)) !== JSON.stringify(before)",
                           arg=[view.element_handle(), before], timeout=30000)


def dom_controls(view) -> dict:
    """{label text: value} of the widget's visible controls, as the page shows them."""
    return {c["label"]: c["value"] for c in view.evaluate(LIST_CONTROLS)}


def answer_explorer(view) -> None:
    """The drawn groups are what normlab computes for the settings the page shows (the kernel drew them)."""
    from normlab.widgets import explorer

    c = dom_controls(view)
    layout, norm = c["布局 (layout)"], c["归一化 (norm)"]
    dims = sorted((d for d in explorer.SPEC["controls"] if d.get("part_of") == "shape" and d["layout"] == layout),
                  key=lambda d: d["index"])
    shape = [int(c[d["label"]]) for d in dims]
    g = int(next((v for k, v in c.items() if k.startswith("组数 G")), 2) or 2)
    data = explorer.explorer_data(norm, layout, shape, g)
    drawn = drawn_explorer(view.element_handle())
    assert drawn["groups"] == grid_groups(data), f"{layout} {norm} {shape}: the drawn groups are not the kernel's"
    assert drawn["lit"] == drawn["same_group"]


def answer_gradflow(view) -> None:
    """The last drawn points are gradflow.curve_data() for the settings the page shows (seed 0 in 01)."""
    from normlab.widgets import gradflow

    values = view.evaluate("v => Object.fromEntries(Array.from(v.querySelectorAll('select[name], input[name]'))"
                           ".map(e => [e.name, e.value]))")
    fixed = gradflow.DEFAULTS | LAB_SETTINGS["gradflow"]             # controls a lesson does not show
    controls = {n: int(values.get(n, fixed[n])) if n in ("depth", "width") else values.get(n, fixed[n])
                for n in gradflow.CONTROL_ORDER}
    data = gradflow.curve_data(controls, seed=0)
    drawn = drawn_gradflow(view.element_handle())
    assert drawn["grad"][0] == pytest.approx(data["grad"][-1], rel=1e-3), controls
    assert drawn["act"][0] == pytest.approx(data["act"][-1], rel=1e-3), controls


KERNEL_ANSWER = {"explorer": answer_explorer, "gradflow": answer_gradflow}


def test_lab_toy_redraws_through_the_kernel(lab00, artifacts):
    """The host alone in JupyterLab: anywidget loads the toy module, a control change goes to the
    kernel, compute() answers, the front-end redraws. Beside it a 先想一想 choice and its answer fold
    (marked as the export marks it): the fold stays shut until a pick, which the kernel records."""
    page = lab00["page"]
    show_tab(page, "zz_00_toy")
    answer_shut_until_a_pick(page, lab00["store"], artifacts)
    change_live_control(page, "99_toy", "_toy", artifacts)


def answer_shut_until_a_pick(page, store: Path, artifacts: Path) -> None:
    """JupyterLab's sanitizer keeps the fold's marker; a click on the fold before a pick leaves it shut
    and says why; the kernel's reply to a pick (data-saved, the file written) opens it."""
    key = ".".join(TOY_KEY)
    ask, fold = current(page).locator(".nl-pr-ask"), current(page).locator(f".jp-MarkdownCell details:has(.{P.answer_class(key)})")
    ask.wait_for(timeout=30000)
    fold.scroll_into_view_if_needed()
    assert ask.get_attribute("data-lock") == "1" and not store.exists()
    fold.locator("summary").click()
    page.wait_for_timeout(200)
    assert not fold.evaluate("d => d.open")
    assert "先在上面选一个预测再看答案" in fold.locator(".nl-answer-why").inner_text()
    page.screenshot(path=str(artifacts / "predict_lab_locked.png"))
    ask.get_by_role("radio", name="(B)").click()
    page.wait_for_selector(".nl-pr-ask[data-saved='1'][data-lock='0']", timeout=3000)   # before the 4 s fail-open
    assert f'"{key}"' in store.read_text(encoding="utf-8")
    fold.locator("summary").click()
    page.wait_for_timeout(200)
    assert fold.evaluate("d => d.open") and fold.locator(".nl-answer-why").count() == 0
    page.screenshot(path=str(artifacts / "predict_lab_opened.png"))


def test_lab_widget_redraws_through_the_kernel(lab03, artifacts):
    """03's explorer on lab03's page (03 up to its explorer, run once for this test and the choice test
    below: issue 27). GradFlow (01) is checked in 01's learner copy: asks_then_runs_on."""
    page = lab03["page"]
    show_tab(page, "zz_03_open")
    assert not errors_in(page), errors_in(page)
    change_live_control(page, "03_layernorm", "explorer", artifacts)


# --- JupyterLab, as a learner opens a lesson the course exported (issue 28 items 2 and 5):
#
# * opening it does not mark it unsaved (the export writes the kernelspec and language_info the kernel
#   would write: normlab/course/kernelmeta.py); control: the same notebook with the sources' old metadata is
#   marked unsaved at once, so the check can fail;
# * a 先想一想 choice goes through the kernel into the guesses file, and the lesson's summary scores it;
# * the axes explorer is never squeezed into JupyterLab's 24em (312 px) scrolled-output box (a click on
#   the output's left edge turns it on): the whole grid stays visible, without an inner scroll bar.
DIRTY = "() => document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty') !== null"


def open_from_file_browser(page, lab, name: str) -> None:
    """Open ``name`` with a double click in JupyterLab's file browser, in the app already loaded (a
    second page load of JupyterLab cost ~3.5 s of CPU here: issue 27), until it is the current tab and its
    kernel is idle (the server's session says so; the status bar follows the current tab)."""
    import requests

    page.locator(".jp-DirListing-item", has_text=f"{name}.ipynb").first.dblclick()   # (an open one: its tab)
    page.wait_for_selector(f".lm-TabBar-tab.jp-mod-current:has-text('{name}.ipynb')", timeout=30000)

    def idle() -> bool:
        sessions = requests.get(f"{lab['base']}/api/sessions", params={"token": lab["token"]}, timeout=10).json()
        return any(s["path"] == f"{name}.ipynb" and s["kernel"]["execution_state"] == "idle" for s in sessions)
    for _ in range(600):
        if idle():
            break
        page.wait_for_timeout(100)
    else:
        raise AssertionError(f"{name}: its kernel never became idle")
    page.wait_for_selector(".jp-StatusBar-TextItem:has-text('| Idle')", timeout=60000)


def show_tab(page, name: str) -> None:
    """Make the open notebook ``name`` the current tab (a test's notebook, after another test opened others)."""
    page.locator(".lm-DockPanel .lm-TabBar-tab", has_text=f"{name}.ipynb").first.click()
    page.wait_for_selector(f".lm-TabBar-tab.jp-mod-current:has-text('{name}.ipynb')", timeout=30000)
    page.wait_for_selector(".jp-StatusBar-TextItem:has-text('| Idle')", timeout=60000)


def dirty(page) -> bool:
    return page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count() > 0


def test_kernel_metadata_is_what_ipykernel_reports():
    from ipykernel.ipkernel import IPythonKernel
    from jupyter_client.kernelspec import KernelSpecManager

    meta = kernel_metadata()
    assert meta["language_info"] == IPythonKernel.language_info
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert meta["kernelspec"] == {"name": "python3", "display_name": spec.display_name, "language": spec.language}


def old_metadata_copy(lab) -> None:
    """zz_old_metadata: 02 as exported, with the sources' metadata before the fix (the control), cut after
    its first cells (what marks it unsaved is its metadata; a whole lesson costs JupyterLab ~3 s of CPU
    to draw)."""
    import nbformat

    nb = nbformat.read(lab["dir"] / "02_batchnorm.ipynb", 4)
    old = nbformat.from_dict(json.loads(json.dumps(nb)))
    old.cells = old.cells[:4]
    old.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    del old.metadata["language_info"]
    nbformat.write(old, lab["dir"] / "zz_old_metadata.ipynb")


def test_opening_an_exported_lesson_leaves_it_saved(lab_page, lab):
    import nbformat

    page, _ = lab_page
    nb = nbformat.read(lab["dir"] / "02_batchnorm.ipynb", 4)
    assert nb.metadata["kernelspec"] == kernel_metadata()["kernelspec"]
    page.set_viewport_size({"width": 1280, "height": 800})
    open_from_file_browser(page, lab, "zz_old_metadata")        # control: the metadata before the fix
    # JupyterLab writes the kernel's metadata once kernel_info has come back: the control shows how long
    # after "Idle" that takes here; the exported lesson gets three times as long (at least 1 s) to do it
    t0 = time.perf_counter()
    try:
        page.wait_for_function(DIRTY, timeout=10000)
    except Exception as err:  # noqa: BLE001
        raise AssertionError("control: the old metadata should mark the notebook unsaved "
                             "(else this test cannot fail)") from err
    settle_ms = max(1000, 3000 * (time.perf_counter() - t0))
    open_from_file_browser(page, lab, "02_batchnorm")      # as a learner opens the next lesson
    page.wait_for_timeout(settle_ms)
    assert not dirty(page), f"opening the exported lesson marked it unsaved (within {settle_ms:.0f} ms of Idle)"


LAB03_STORE = "predictions 03.json"     # 03's guesses, a file of their own in the server's folder


def lesson_03_up_to_the_explorer(lab) -> None:
    """zz_03_open: lesson 03's code cells up to the axes explorer's (the kernel state a learner's Run All
    gives it; its prose is no part of these tests, and costs JupyterLab CPU to typeset), with the guesses
    file set in a first cell and the lesson's summary after it."""
    import nbformat

    nb = nbformat.read(lab["dir"] / "03_layernorm.ipynb", 4)
    last = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "AxesExplorer(" in c.source)
    nb.cells = [c for c in nb.cells[:last + 1] if c.cell_type == "code"]
    nb.cells.insert(1, nbformat.v4.new_code_cell(f"import os\nos.environ['NORMLAB_PREDICTIONS'] = {str(lab['dir'] / LAB03_STORE)!r}"))
    nb.cells.append(nbformat.v4.new_code_cell(P.summary_source("03"), metadata={"tags": [P.SUMMARY_TAG]}))
    nbformat.write(nb, lab["dir"] / "zz_03_open.ipynb")


@pytest.fixture(scope="module")
def lab03(lab_page, lab):
    """zz_03_open run once, at 1280x800."""
    return run_once(lab_page, lab, "zz_03_open", LAB03_STORE, 1280, 800)


def test_choice_goes_through_the_kernel_and_the_explorer_is_never_squeezed(lab03, artifacts):
    page, store = lab03["page"], lab03["store"]
    page.set_viewport_size({"width": 1280, "height": 800})
    show_tab(page, "zz_03_open")
    assert not errors_in(page), errors_in(page)
    # 1. the first 先想一想 of 03: "除以 E − 1" is (B)
    ask = current(page).locator(".nl-pr-ask").first
    ask.scroll_into_view_if_needed()
    assert ask.get_attribute("data-source") == "live" and not store.exists()
    ask.get_by_role("radio", name="(B)").click()
    page.wait_for_function("el => el.dataset.saved === '1'", arg=ask.element_handle(), timeout=30000)
    saved = json.loads(store.read_text(encoding="utf-8"))["guesses"]
    assert saved["03.var-default"]["choice"] == "B"
    summary = current(page).locator(".nl-pr-summary")
    summary.scroll_into_view_if_needed()
    page.wait_for_function("el => el.dataset.right === '1'", arg=summary.element_handle(), timeout=30000)
    assert summary.locator("tbody tr").first.get_attribute("data-result") == "right"
    page.screenshot(path=str(artifacts / "lab_predict_summary.png"))
    # 2. the explorer's output in JupyterLab's scrolled mode (a click on the output's left edge)
    out = current(page).locator(".jp-CodeCell:has(.nl-explorer)")
    out.scroll_into_view_if_needed()
    overlay = out.locator(".jp-OutputArea-promptOverlay").first
    overlay.click()
    page.wait_for_timeout(500)
    assert out.evaluate("c => c.classList.contains('jp-mod-outputsScrolled')"), "the click did not turn scrolling on"
    box = out.evaluate("""c => { const a = c.querySelector('.jp-Cell-outputArea'); const x = c.querySelector('.nl-explorer');
        const b = x.querySelector('.nl-ax-board').getBoundingClientRect(), r = a.getBoundingClientRect();
        const e = x.getBoundingClientRect(), s = getComputedStyle(a);
        return { area: r.height, inner: a.scrollHeight, client: a.clientHeight, explorer: e.height,
                 scrolls: ['auto', 'scroll'].includes(s.overflowY) && a.scrollHeight > a.clientHeight + 1,
                 maxHeight: s.maxHeight, explorerBottom: e.bottom,
                 boardBottom: b.bottom, areaBottom: r.bottom, boardRight: b.right, areaRight: r.right }; }""")
    out.screenshot(path=str(artifacts / "lab_explorer_scrolled_mode.png"))
    assert not box["scrolls"] and box["maxHeight"] == "none", f"the explorer scrolls inside its output: {box}"
    assert box["explorerBottom"] <= box["areaBottom"] + 1 and box["boardBottom"] <= box["areaBottom"] + 1, box
    assert box["boardRight"] <= box["areaRight"] + 1, box


# --- JupyterLab, the learner copy: a question before it is code (issue 36) -------------------------------
#
# One notebook, opened in the module's page (no second JupyterLab load): lesson 01's learner copy up to its
# second choice cell (its GradFlow cell among them), then the first prompt of each other lesson as its learner copy lays it out (the prompt's
# markdown cell through its answer fold), and last, as the control, 01's first experiment cell as the
# solution copy has it (its code in view). Before any cell runs, every prompt shows its question and its
# choices, and no code is in view but the control's; Run All stops at 01's first prompt before its
# experiment; the pick goes through the kernel and the run goes on, opening the experiment's code, up to
# the second prompt; an interrupt there ends the run with one line. Then GradFlow, which that run showed,
# redraws through the kernel (change_live_control), in the kernel state a learner's Run All gives it.

def first_prompts_notebook(folder: Path) -> tuple[str, list[dict]]:
    """zz_prompts.ipynb in ``folder`` (above); returns its name and the entries of the prompts in it."""
    import nbformat

    def learner(lesson: str):
        name = next(p for p in sorted(folder.glob(f"{lesson}_*.ipynb"))
                    if p.stem.endswith("_learner") or not p.with_name(f"{p.stem}_learner.ipynb").exists())
        return nbformat.read(name, 4)

    nb = learner("01")
    asks = [i for i, c in enumerate(nb.cells) if P.PREDICT_TAG in c.metadata.get("tags", [])]
    cells = nb.cells[:asks[1] + 1]
    shown = [P.entry("01", "depth-std"), P.entry("01", "typical-gain")]
    for lesson in ("02", "03", "04", "05", "06", "07", "08", "09"):
        other = learner(lesson).cells
        i = next(i for i, c in enumerate(other) if P.PREDICT_TAG in c.metadata.get("tags", []))
        key = P.ASK_CALL.search(other[i].source).groups()
        fold = next(j for j in range(i, len(other)) if P.answer_class(".".join(key)) in other[j].source)
        prompt = other[i - 1]                    # its cell from the prompt's paragraph on (less to typeset)
        prompt.source = prompt.source[prompt.source.index(P.MARK):]
        cells += [prompt] + other[i:fold + 1]
        shown.append(P.entry(*key))
    solution = nbformat.read(folder / "01_residuals.ipynb", 4).cells
    control = solution[next(i for i, c in enumerate(solution) if P.PREDICT_TAG in c.metadata.get("tags", [])) + 1]
    nb.cells = [nbformat.from_dict({**c, "id": f"zz{i}"}) for i, c in enumerate(cells + [control])]   # ids unique
    nbformat.write(nb, folder / "zz_prompts.ipynb")
    return "zz_prompts", shown


IN_VIEW_CODE = """(panel) => Array.from(panel.querySelectorAll('.jp-CodeCell .jp-InputArea .cm-content'))
    .map(e => e.textContent)"""


def test_learner_copy_asks_before_it_shows_and_run_all_waits_for_the_guess(lab, lab_page, artifacts):
    """~10 s of CPU here (the kernel's imports, 01's first experiment and its GradFlow; JupyterLab is
    already loaded)."""
    page, _ = lab_page
    page.set_viewport_size({"width": 1366, "height": 768})
    asks_then_runs_on(page, lab, artifacts)


def asks_then_runs_on(page, lab, artifacts: Path) -> None:
    import nbformat
    import requests

    name, shown = "zz_prompts", first_prompts_notebook(lab["dir"])[1]      # (written before the page loaded)
    n = len(nbformat.read(lab["dir"] / f"{name}.ipynb", 4).cells)
    page.evaluate("() => { window.__guesses = []; document.addEventListener('normlab:guess', e => window.__guesses.push(e.detail)); }")
    open_from_file_browser(page, lab, name)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    # JupyterLab attaches a long notebook's cells over a second or two
    page.wait_for_function(f"() => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').length >= {n}",
                           timeout=30000)
    page.screenshot(path=str(artifacts / "lab_learner_before_run.png"))
    # 1. before any cell runs: each prompt's question and choices (scrolled into view: JupyterLab skips
    # drawing what is off screen); no code in view but the control's
    asks = panel.locator(".jp-CodeCell", has=page.locator(".jp-InputPlaceholder", has_text=P.ASK_LINE))
    assert asks.count() == len(shown)
    for i, e in enumerate(shown):
        question = asks.nth(i).evaluate("c => { const p = c.previousElementSibling; p.scrollIntoView(); return p.innerText; }")
        assert e["starts"].replace("`", "") in question.replace("`", ""), e["id"]
        assert all(f"({k})" in question for k in e["keys"]), (e["id"], question)
        if P.CHOICES in question:          # a prompt for a number: the export lists the choices
            assert all(f"({k}) {option}" in question for k, option in zip(e["keys"], e["options"])), (e["id"], question)
        asks.nth(i).scroll_into_view_if_needed()
        if e["id"] in ("depth-std", "var-default"):      # choices of its own; choices the export lists
            page.wait_for_timeout(300)
            page.screenshot(path=str(artifacts / f"lab_learner_prompt_{e['id']}.png"))
    hidden = sum(bool(c.metadata.get("jupyter", {}).get("source_hidden")) for c in
                 nbformat.read(lab["dir"] / f"{name}.ipynb", 4).cells if c.cell_type == "code")
    assert panel.locator(".jp-CodeCell .jp-InputPlaceholder").count() == hidden >= 2 * len(shown)
    control = panel.locator(".jp-CodeCell").last
    control.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    code = panel.evaluate(IN_VIEW_CODE)
    # imports; the control. GradFlow's cell, among the first prompt's discussion after its fold, is shut too
    assert len(code) == 2 and "expect(" in code[-1] and not any("GradFlow(" in c for c in code), code
    assert not any("expect(" in c or "predict" in c for c in code[:-1]), code
    # 2. Run All stops at the first prompt, before its experiment, and says so in one line
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    ask = panel.locator(".nl-pr-ask").first
    ask.wait_for(timeout=60000)
    panel.locator(".jp-OutputArea-output", has_text=predict_line("WAITING")).wait_for(timeout=30000)
    experiment = panel.locator(".jp-CodeCell").nth(3)                  # setup, imports, choice, experiment
    page.wait_for_timeout(1500)
    # a collapsed cell shows no [*]; the control (in view, last) is queued behind the waiting cell
    assert panel.locator(".jp-CodeCell").last.locator(".jp-InputPrompt").inner_text().strip() == "[*]:"
    assert experiment.locator(".jp-OutputArea-output").count() == 0
    assert experiment.locator(".jp-InputPlaceholder").count() == 1
    ask.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    page.screenshot(path=str(artifacts / "lab_learner_run_all_waits.png"))
    # a fold with no guess stays shut; a teacher's reveal (issue 39's event) opens one
    fold = panel.locator(f"details:not(.nl-discussion):has(> summary > .{P.answer_class('01.depth-std')})")
    discussion = panel.locator(f"details.nl-discussion:has(> summary > .{P.answer_class('01.depth-std')})")
    fold.locator("summary").click()
    assert not fold.evaluate("d => d.open") and not discussion.evaluate("d => d.open")
    discussion.scroll_into_view_if_needed()
    assert "几乎为零" not in discussion.inner_text()                     # Run All rendered it: still shut
    # 3. the pick: saved by the kernel, the run goes on up to the second prompt; the code opens
    ask.get_by_role("radio", name="(B)").click()
    panel.locator(".jp-OutputArea-output", has_text=predict_line("RUNNING_ON", choice="B")).wait_for(timeout=30000)
    experiment.locator(".jp-OutputArea-output img").first.wait_for(timeout=60000)
    panel.locator(".nl-pr-ask").nth(1).wait_for(timeout=60000)
    assert page.evaluate("() => window.__guesses") == [{"lesson": "01", "id": "depth-std", "choice": "B"}]
    assert experiment.locator(".jp-InputPlaceholder").count() == 0
    assert "expect(" in experiment.locator(".cm-content").inner_text()
    assert discussion.evaluate("d => d.open") and "几乎为零" in discussion.inner_text()   # opened with the code
    panel.locator(".jp-CodeCell .jp-InputArea .cm-content", has_text="GradFlow(").first.wait_for(state="attached",
                                                                                                  timeout=10000)
    fold.locator("summary").click()
    assert fold.evaluate("d => d.open")
    assert fold.locator(".nl-answer-verdict").get_attribute("data-result") == "right"
    fold.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    page.screenshot(path=str(artifacts / "lab_learner_fold_verdict.png"))
    second = panel.locator(".nl-pr-ask").nth(1)
    second.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    page.screenshot(path=str(artifacts / "lab_learner_after_pick.png"))
    saved = json.loads((lab["dir"] / "predictions.json").read_text(encoding="utf-8"))["guesses"]
    assert saved["01.depth-std"]["choice"] == "B"
    page.evaluate("() => document.dispatchEvent(new CustomEvent('normlab:reveal', {detail: {lesson: '02', id: 'grad-mode'}}))")
    assert panel.locator(f"details:not(.nl-discussion):has(> summary > .{P.answer_class('02.grad-mode')})").evaluate("d => d.open")
    # 4. an interrupt at the second prompt: one line, no traceback; nothing after it runs
    sessions = requests.get(f"{lab['base']}/api/sessions", params={"token": lab["token"]}, timeout=10).json()
    (kernel,) = [s["kernel"]["id"] for s in sessions if s["path"] == f"{name}.ipynb"]
    requests.post(f"{lab['base']}/api/kernels/{kernel}/interrupt", params={"token": lab["token"]}, timeout=10)
    # (JupyterLab draws an error as application/vnd.jupyter.stderr: its traceback's lines, here one)
    error = panel.locator(".jp-OutputArea-output", has_text=predict_line("INTERRUPTED"))
    error.wait_for(timeout=30000)
    assert error.count() == 1 and error.inner_text().strip() == predict_line("INTERRUPTED")
    assert error.get_attribute("data-mime-type") == "application/vnd.jupyter.stderr"
    page.wait_for_selector(".jp-StatusBar-TextItem:has-text('| Idle')", timeout=30000)
    assert panel.locator(".nl-pr-ask").count() == 2                     # the later prompts never ran
    # 5. GradFlow (shown by the run before the second prompt) redraws through the now idle kernel
    change_live_control(page, "01_residuals", "gradflow", artifacts, call="GradFlow(")
    requests.delete(f"{lab['base']}/api/sessions/{[s['id'] for s in sessions if s['path'] == f'{name}.ipynb'][0]}",
                    params={"token": lab["token"]}, timeout=10)


def predict_line(name: str, **kw) -> str:
    from normlab.widgets import predict

    return getattr(predict, name).format(**kw)
