"""The static book and the slides, opened in a real browser (Chromium via Playwright)."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from urllib.parse import urljoin, urlparse

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.md"))

# Draws two characters on a canvas in the page's own font: a missing glyph draws the same
# box for both, real glyphs differ. Returns true when Chinese text really renders.
GLYPH_CHECK = """() => {
  const font = getComputedStyle(document.body).fontFamily;
  const draw = (ch) => { const c = document.createElement('canvas'); c.width = c.height = 48;
    const g = c.getContext('2d'); g.font = '40px ' + font; g.fillText(ch, 2, 40);
    return Array.from(g.getImageData(0, 0, 48, 48).data).join(','); };
  const a = draw('归'), b = draw('化'), blank = draw(' ');
  return a !== b && a !== blank && b !== blank;
}"""


# Formulas MathJax left as raw $...$ in the prose (code blocks may contain $ legitimately).
RAW_TEX = r"""() => { const c = document.querySelector('.slides').cloneNode(true);
  c.querySelectorAll('pre, code, .jp-InputArea, .jp-OutputArea').forEach(e => e.remove());
  document.body.appendChild(c); const t = c.innerText; c.remove();
  return (t.match(/\$[^$\s][^$]*\$/g) || []).length; }"""


def open_clean(browser, url: str):
    """Open a page and record console errors, page errors and failed/4xx requests."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.goto(url, wait_until="load")
    page.wait_for_timeout(300)
    return page, problems


def site_pages(book_url: str) -> list[str]:
    return [f"{book_url}/intro.html"] + [f"{book_url}/notebooks/{n}.html" for n in NOTEBOOKS]


def test_every_page_is_clean_with_math_images_and_links(browser, book_url, artifacts):
    seen_math = 0
    for url in site_pages(book_url):
        page, problems = open_clean(browser, url)
        page.wait_for_function("() => !window.MathJax || !MathJax.startup || MathJax.startup.promise", timeout=10000)
        page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
        math_src = page.locator(".math").count()
        rendered = page.locator("mjx-container").count()
        assert rendered >= math_src, f"{url}: {math_src} formulas, {rendered} rendered by MathJax"
        seen_math += rendered
        broken_imgs = page.evaluate("() => Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src.slice(0, 80))")
        assert not broken_imgs, f"{url}: images not loaded: {broken_imgs}"
        hrefs = page.evaluate("() => Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))")
        for href in hrefs:
            target = urljoin(url, href)
            if urlparse(target).netloc != urlparse(book_url).netloc or href.startswith("#"):
                continue
            with urllib.request.urlopen(target.split("#")[0]) as resp:
                assert resp.status == 200, f"{url}: broken link {href}"
        assert page.evaluate(GLYPH_CHECK), f"{url}: Chinese text renders as boxes"
        name = urlparse(url).path.strip("/").replace("/", "_")
        page.screenshot(path=str(artifacts / f"book_{name}.png"))
        page.close()
        assert not problems, f"{url}: {problems}"
    assert seen_math >= 2  # the intro page: an inline epsilon and the aligned block of three norms


def test_toc_follows_course_order_and_pages_link_their_source(browser, book_url):
    page, _ = open_clean(browser, f"{book_url}/intro.html")
    nav = page.evaluate("() => Array.from(document.querySelectorAll('nav.bd-links a')).map(a => a.getAttribute('href'))")
    order = [re.search(r"(\d\d_[a-z_]+)\.html", h).group(1) for h in nav if re.search(r"\d\d_[a-z_]+\.html", h)]
    assert order == NOTEBOOKS
    page.close()
    for name in NOTEBOOKS:
        page, _ = open_clean(browser, f"{book_url}/notebooks/{name}.html")
        link = page.locator(f"a:has-text('notebooks/{name}.md')").first
        href = urljoin(page.url, link.get_attribute("href"))
        with urllib.request.urlopen(href) as resp:
            assert resp.read().decode() == (ROOT / "notebooks" / f"{name}.md").read_text()
        page.close()


def test_widgets_degrade_to_a_static_note(browser, book_url):
    for name in NOTEBOOKS:
        html = (ROOT / "build" / "book" / "html" / "notebooks" / f"{name}.html").read_text()
        assert "application/vnd.jupyter.widget-view+json" not in html
        executed = (ROOT / "build" / "executed" / f"{name}.ipynb").read_text()
        if "application/vnd.jupyter.widget-view+json" in executed:  # it showed a live widget
            assert "normlab-widget-note" in html, name


def test_speaker_notes_from_the_sources_reach_the_slides(slides_url):
    html = (ROOT / "build" / "slides" / "00_course_map.slides.html").read_text()
    assert '<aside class="notes">' in html and "讲课提示" in html


def test_slides_open_offline_and_advance(browser, slides_url, artifacts):
    for name in NOTEBOOKS:
        page, problems = open_clean(browser, f"{slides_url}/{name}.slides.html")
        page.wait_for_selector(".reveal.ready", timeout=15000)  # reveal.js initialised (it is AMD-loaded)
        total = page.locator(".slides section").count()
        assert total >= 3, f"{name}: only {total} slides"
        first = page.locator("section.present").first.inner_text()
        page.keyboard.press("Space")
        page.wait_for_timeout(400)
        assert page.locator("section.present").first.inner_text() != first, f"{name}: the slides did not advance"
        assert page.evaluate(GLYPH_CHECK), f"{name}: Chinese text renders as boxes"
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=15000)
        page.evaluate("() => MathJax.startup.promise")
        raw_tex = page.evaluate(RAW_TEX)
        assert raw_tex == 0, f"{name}: {raw_tex} formulas left as raw $...$ text"
        page.screenshot(path=str(artifacts / f"slides_{name}.png"))
        page.close()
        assert not problems, f"{name}: {problems}"
