"""The course's own widgets in the built book and slides, opened from file://, with no kernel (split from
tests/test_browser_widgets.py, whose helpers it uses, so that the two long modules can run on two workers
at once: issue 27). From the book's and the slides' servers: the walks over every page and every deck
(tests/test_browser_book.py, tests/test_slides_readable.py). Through a real kernel: test_browser_lab.py."""

from __future__ import annotations

from conftest import Tab
from test_browser_widgets import (BOOK, SLIDES, exercise, pages_with_widgets, pick_every_prompt, real_widgets,
                                  show_slide)


def test_book_widgets_work_from_file_with_no_kernel(browser, book_url, artifacts):
    """The book's pages with a course widget opened from file:// (the same pages from the book's server:
    test_browser_book.py's walk over every page, test_book_widgets_work_from_a_server_with_no_kernel)."""
    pages = pages_with_widgets(BOOK / "notebooks", "*.html")
    names = {p.stem for p in pages}
    assert {"01_residuals", "02_batchnorm", "03_layernorm", "06_placement"} <= names, names
    tab = Tab(browser)                   # one tab, page after page, as a reader
    for path in pages:
        problems, page = tab.visit(path.as_uri()), tab.page
        # a reader guesses first: the learners' book shows a prompt's experiment (a widget among it) after a
        # pick (issue 40; tests/test_browser_book_lock.py checks the lock itself)
        pick_every_prompt(page)
        boxes = real_widgets(page)
        assert boxes, f"{path.stem}: no widget rendered"
        assert not page.locator(".normlab-web-failed").count(), page.locator(".normlab-web-failed").first.inner_text()
        for i, box in enumerate(boxes):
            assert exercise(page, box, artifacts, f"widgets_book_file_{path.stem}_{i}") >= 1
        assert not problems, f"{path.stem}: {problems}"
    tab.close()


def test_slides_widgets_work_from_file_with_no_kernel(browser, decks_url, artifacts):
    """The decks with a course widget opened from file:// (from the slides' server: test_slides_readable.py's
    walk over every deck, test_slides_widgets_work_from_a_server_with_no_kernel)."""
    decks = pages_with_widgets(SLIDES, "*.slides.html")
    assert {"01_residuals", "03_layernorm", "06_placement"} <= {p.name.split(".")[0] for p in decks}
    tab = Tab(browser, height=800)       # one tab, deck after deck, as a speaker's
    for path in decks:
        stem = path.name.split(".")[0]
        problems, page = tab.visit(path.as_uri()), tab.page
        page.wait_for_selector(".reveal.ready", timeout=15000)
        boxes = real_widgets(page)
        assert boxes, f"{stem}: no widget rendered"
        for i, box in enumerate(boxes):
            show_slide(page, box)
            assert exercise(page, box, artifacts, f"widgets_slides_file_{stem}_{i}") >= 1
        assert not problems, f"{stem}: {problems}"
    tab.close()
