"""What a reader of the built book loads: its total weight and its largest page, printed after each
build and kept in build/logs/book.log."""

from __future__ import annotations

import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def page_weight(html: Path) -> tuple[int, int, Path]:
    """(total bytes of the built book, bytes of its largest page, that page). Sphinx's cache
    (.doctrees, .buildinfo) is no part of what a reader loads."""
    files = [f for f in html.rglob("*") if f.is_file() and not any(p.startswith(".") for p in f.relative_to(html).parts)]
    pages = [f for f in files if f.suffix == ".html"]
    largest = max(pages, key=lambda f: f.stat().st_size)
    return sum(f.stat().st_size for f in files), largest.stat().st_size, largest


def report_weight(html: Path) -> str:
    """Print the book's weight (everything a reader may load: pages, MathJax, theme) and keep the line
    in build/logs/book.log."""
    total, largest, page = page_weight(html)
    widgets = sum(p.read_text(encoding="utf-8").count('class="normlab-web"') for p in html.rglob("*.html"))
    line = (f"[normlab] book weight: {total / 2**20:.1f} MiB in all; largest page {page.relative_to(html)} "
            f"{largest / 2**20:.2f} MiB; {widgets} static widget(s)")
    print(line)
    logs = ROOT / "build" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "book.log", "a", encoding="utf-8") as log:
        log.write(time.strftime("%Y-%m-%d %H:%M:%S ") + line + "\n")
    return line
