"""JupyterLab in a real browser: run a notebook, move a widget control, see the output change."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_browser_book import GLYPH_CHECK

ROOT = Path(__file__).resolve().parent.parent
# The notebooks whose widgets the course leans on: the axes explorer and the gradient-flow lab.

# A fingerprint of what the kernel drew in the output area that holds the control: its images
# (an ipywidgets Image gets a new blob URL only when the kernel sends new PNG bytes) and its HTML
# panels. Slider readouts are left out on purpose: the browser updates them by itself, so they
# change even when the kernel never answers.
OUTPUT_FINGERPRINT = """(area) => Array.from(area.querySelectorAll('img, .widget-html-content'))
  .map(e => e.tagName === 'IMG' ? e.src + '#' + e.naturalWidth : e.textContent).join('|')"""


def run_all(page, lab, name: str) -> None:
    # a workspace of its own (reset), so no tab of an earlier test is open beside it
    page.goto(f"{lab['base']}/lab/workspaces/t{name}/tree/{name}.ipynb?reset&token={lab['token']}")
    page.wait_for_selector(".jp-Notebook", timeout=60000)
    # the kernel is connected once the status bar says so; Run All before that is dropped
    page.wait_for_selector(".jp-StatusBar-TextItem:has-text('| Idle')", timeout=60000)
    page.wait_for_timeout(500)
    started = """() => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
        .some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))"""
    finished = """() => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
        .every(p => /\\[\\d+\\]/.test(p.textContent))"""
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
    return page.evaluate("""() => Array.from(document.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]')).map(e => e.textContent.slice(0, 300))""")


def test_first_notebook_runs_in_jupyterlab_with_chinese_glyphs(browser, lab, artifacts):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    run_all(page, lab, "00_course_map")
    assert not errors_in(page)
    assert page.locator(".jp-OutputArea-output img").count() >= 1  # the figure was drawn
    assert page.evaluate(GLYPH_CHECK)
    page.screenshot(path=str(artifacts / "lab_00_course_map.png"))
    page.close()
