"""JupyterLab, as a learner opens a lesson the course exported (issue 28 items 2 and 5):

* opening it does not mark it unsaved (the export writes the kernelspec and language_info the kernel
  would write: normlab/kernelmeta.py); control: the same notebook with the sources' old metadata is
  marked unsaved at once, so the check can fail;
* a 先想一想 choice goes through the kernel into the guesses file, and the lesson's summary scores it;
* the axes explorer is never squeezed into JupyterLab's 24em (312 px) scrolled-output box (a click on
  the output's left edge turns it on): the whole grid stays visible, without an inner scroll bar.
"""

from __future__ import annotations

import json

import pytest

from normlab import predictions as P
from normlab.kernelmeta import kernel_metadata

OPEN_WAIT_MS = 2500        # JupyterLab writes the kernel's metadata once kernel_info has come back


def open_notebook(page, lab, name: str) -> None:
    page.goto(f"{lab['base']}/lab/workspaces/o{name}/tree/{name}.ipynb?reset&token={lab['token']}")
    page.wait_for_selector(".jp-Notebook", timeout=60000)
    page.wait_for_selector(".jp-StatusBar-TextItem:has-text('| Idle')", timeout=60000)
    page.wait_for_timeout(OPEN_WAIT_MS)


def dirty(page) -> bool:
    return page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count() > 0


def test_kernel_metadata_is_what_ipykernel_reports():
    from ipykernel.ipkernel import IPythonKernel
    from jupyter_client.kernelspec import KernelSpecManager

    meta = kernel_metadata()
    assert meta["language_info"] == IPythonKernel.language_info
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert meta["kernelspec"] == {"name": "python3", "display_name": spec.display_name, "language": spec.language}


def test_opening_an_exported_lesson_leaves_it_saved(browser, lab):
    import nbformat

    nb = nbformat.read(lab["dir"] / "02_batchnorm.ipynb", 4)
    assert nb.metadata["kernelspec"] == kernel_metadata()["kernelspec"]
    old = nbformat.from_dict(json.loads(json.dumps(nb)))           # control: the metadata before the fix
    old.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    del old.metadata["language_info"]
    nbformat.write(old, lab["dir"] / "zz_old_metadata.ipynb")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    open_notebook(page, lab, "zz_old_metadata")
    assert dirty(page), "control: the old metadata should mark the notebook unsaved (else this test cannot fail)"
    open_notebook(page, lab, "02_batchnorm")
    assert not dirty(page), "opening the exported lesson marked it unsaved"
    page.close()


@pytest.fixture
def lesson03(lab, tmp_path):
    """Lesson 03 up to the axes explorer's cell, with the guesses file in tmp_path (set in a first cell)."""
    import nbformat

    store = tmp_path / "predictions.json"
    nb = nbformat.read(lab["dir"] / "03_layernorm.ipynb", 4)
    last = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "AxesExplorer(" in c.source)
    nb.cells = nb.cells[:last + 1]
    nb.cells.insert(1, nbformat.v4.new_code_cell(f"import os\nos.environ['NORMLAB_PREDICTIONS'] = {str(store)!r}"))
    nb.cells.append(nbformat.v4.new_code_cell(P.summary_source("03"), metadata={"tags": [P.SUMMARY_TAG]}))
    nbformat.write(nb, lab["dir"] / "zz_03_open.ipynb")
    return "zz_03_open", store


def test_choice_goes_through_the_kernel_and_the_explorer_is_never_squeezed(browser, lab, lesson03, artifacts):
    from test_browser_lab import errors_in, run_all

    name, store = lesson03
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    run_all(page, lab, name)
    assert not errors_in(page), errors_in(page)
    # 1. the first 先想一想 of 03: "除以 E − 1" is (B)
    ask = page.locator(".nl-pr-ask").first
    ask.scroll_into_view_if_needed()
    assert ask.get_attribute("data-source") == "live" and not store.exists()
    ask.get_by_role("radio", name="(B)").click()
    page.wait_for_function("el => el.dataset.saved === '1'", arg=ask.element_handle(), timeout=30000)
    saved = json.loads(store.read_text(encoding="utf-8"))["guesses"]
    assert saved["03.var-default"]["choice"] == "B"
    summary = page.locator(".nl-pr-summary")
    summary.scroll_into_view_if_needed()
    page.wait_for_function("el => el.dataset.right === '1'", arg=summary.element_handle(), timeout=30000)
    assert summary.locator("tbody tr").first.get_attribute("data-result") == "right"
    page.screenshot(path=str(artifacts / "lab_predict_summary.png"))
    # 2. the explorer's output in JupyterLab's scrolled mode (a click on the output's left edge)
    out = page.locator(".jp-CodeCell:has(.nl-explorer)")
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
    page.close()
