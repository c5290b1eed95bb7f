"""The course's own widgets in the built book and slides, with no kernel (split from
tests/test_browser_widgets.py, whose helpers it uses, so that the two long modules can run on the two
workers at once: issue 27). The same front-end through a real kernel: test_browser_widgets.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import Tab, serve
from test_browser_widgets import BOOK, SLIDES, exercise, explorer_arrow_keys, show_slide, widgets


@pytest.fixture(scope="module")
def site_url(request):
    """The built book on 127.0.0.1: built by conftest's book_url, or with NORMLAB_REUSE_BUILD=1 the
    book already in build/book/html (to rerun these tests without executing the notebooks again)."""
    if os.environ.get("NORMLAB_REUSE_BUILD") == "1" and (BOOK / "index.html").exists():
        url, server = serve(BOOK)
        yield url
        server.shutdown()
    else:
        yield request.getfixturevalue("book_url")


def pages_with_widgets(folder: Path, pattern: str) -> list[Path]:
    """The pages holding an explorer or a gradient-flow widget (the 先想一想 choices are on every lesson's
    page: tests/test_predictions.py drives them)."""
    return sorted(p for p in folder.glob(pattern)
                  if any(f'data-widget="{w}"' in p.read_text(encoding="utf-8") for w in ("explorer", "gradflow")))


def real_widgets(page) -> list:
    return [b for b in widgets(page) if b.get_attribute("data-widget") in ("explorer", "gradflow")]


@pytest.mark.parametrize("via", ["file", "server"])
def test_book_widgets_work_with_no_kernel(browser, site_url, artifacts, via):
    pages = pages_with_widgets(BOOK / "notebooks", "*.html")
    names = {p.stem for p in pages}
    assert {"01_residuals", "02_batchnorm", "03_layernorm", "06_placement"} <= names, names
    tab = Tab(browser)                   # one tab, page after page, as a reader
    for path in pages:
        url = path.as_uri() if via == "file" else f"{site_url}/notebooks/{path.name}"
        problems, page = tab.visit(url), tab.page
        # a reader guesses first: the learners' book shows a prompt's experiment (a widget among it) after a
        # pick (issue 40; tests/test_browser_book_lock.py checks the lock itself)
        page.evaluate("() => document.querySelectorAll('.nl-pr-ask[data-key]').forEach("
                      "a => a.querySelector('.nl-pr-option').click())")
        boxes = real_widgets(page)
        assert boxes, f"{path.stem}: no widget rendered"
        assert not page.locator(".normlab-web-failed").count(), page.locator(".normlab-web-failed").first.inner_text()
        for i, box in enumerate(boxes):
            assert exercise(page, box, artifacts, f"widgets_book_{via}_{path.stem}_{i}") >= 1
        if via == "server":
            explorer_arrow_keys(page, boxes, artifacts, f"widgets_book_{path.stem}")
        assert not problems, f"{path.stem}: {problems}"
    tab.close()


def test_slides_widgets_work_with_no_kernel(browser, decks_url, artifacts):
    decks = pages_with_widgets(SLIDES, "*.slides.html")
    assert {"01_residuals", "03_layernorm", "06_placement"} <= {p.name.split(".")[0] for p in decks}
    tab = Tab(browser, height=800)       # one tab, deck after deck, as a speaker's
    for path in decks:
        stem = path.name.split(".")[0]
        for url in (path.as_uri(), f"{decks_url}/{path.name}"):
            problems, page = tab.visit(url), tab.page
            page.wait_for_selector(".reveal.ready", timeout=15000)
            boxes = real_widgets(page)
            assert boxes, f"{stem}: no widget rendered"
            for i, box in enumerate(boxes):
                show_slide(page, box)
                kind = "file" if url.startswith("file:") else "server"
                assert exercise(page, box, artifacts, f"widgets_slides_{kind}_{stem}_{i}") >= 1
            assert not problems, f"{stem}: {problems}"
    tab.close()


