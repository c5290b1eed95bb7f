"""Shared fixtures for the real-browser tests: Debian's Chromium driven by Playwright (one per
worker, a new context per page), the built book served on localhost (built once per run, from the
notebooks this run's nbval executed), and a JupyterLab server on localhost. Registers the plugin
tools/nbval_book.py (nbval's executions become the book's; the order of the run; its time budget)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import os
import subprocess
import sys
import threading

try:
    import fcntl                      # POSIX; elsewhere the tests run in one process anyway
except ImportError:
    fcntl = None
from pathlib import Path

import pytest

# Triton builds its language helpers (tl.sum, ...) for the interpreter only when TRITON_INTERPRET is set
# before triton is first imported; torch can import triton early (some tests reach torch's compiler
# checks), after which normlab.fused's lazy setting comes too late for the kernel in test_fused. Set it
# before anything is imported; only without a usable GPU, where the interpreter is what runs anyway.
if not os.environ.get("CUDA_VISIBLE_DEVICES") and not Path("/dev/nvidia0").exists():
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str):
    """tools/<name>.py as a module (tests may use the tools; nothing in normlab does)."""
    spec = importlib.util.spec_from_file_location(f"tools_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nbval_book = _tool("nbval_book")


def pytest_configure(config):
    """tools/nbval_book.py for this run (also for the build/nbval notebooks: a registered plugin sees every item)."""
    if not config.pluginmanager.has_plugin("normlab-nbval-book"):
        config.pluginmanager.register(nbval_book, "normlab-nbval-book")
    lazy_nbval_message_log()


class _Pretty:
    """pprint.pformat(obj), made when a log handler formats the record, not before."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __str__(self) -> str:
        import pprint

        return pprint.pformat(self.obj)


def lazy_nbval_message_log() -> None:
    """nbval's get_message passes pformat(msg) to logger.debug for every kernel message, so each one is
    pretty-printed whether or not debug logging is on: 1,756 messages and 1.2 s of CPU for lesson 02
    alone (cProfile; issue 27). Give it a pformat whose text is made only when the line is logged: the
    same debug output when it is on, nothing to do when it is off."""
    try:
        from nbval import kernel
    except ImportError:
        return
    if getattr(kernel, "pformat", None) is not _Pretty:
        kernel.pformat = _Pretty


# The benchmark's browser and JupyterLab server are the tests' too (one place that starts them).
bench_widgets = _tool("bench_widgets")
CHROMIUM, CHROMIUM_ARGS, free_port = bench_widgets.CHROMIUM, bench_widgets.CHROMIUM_ARGS, bench_widgets.free_port
ARTIFACTS = ROOT / "build" / "artifacts"


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium; skipped where none is installed, but never in CI."""
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI needs {CHROMIUM} for the browser tests (run.py test installs it as root)")
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


def open_static_widget(browser, tmp_path: Path, widget, name: str):
    """A page of its own holding ``widget``'s static fragment (grid, no kernel), opened from file://.
    Returns (page, problems): page errors and any http(s) request land in problems."""
    page_file = tmp_path / f"{name}.html"
    page_file.write_text("<!doctype html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'></head>"
                         f"<body>{widget.static_html(png=widget.png())}</body></html>", encoding="utf-8")
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    problems: list[str] = []
    page.on("pageerror", lambda err: problems.append(str(err)))
    page.on("request", lambda r: problems.append(r.url) if r.url.startswith("http") else None)
    page.goto(page_file.as_uri())
    return page, problems


class Tab:
    """One browser tab that visits pages one after another, as a reader clicks from page to page: the
    cache, the compiled scripts and the renderer carry over (a fresh tab per page cost ~0.5 s a page in
    the book's theme and MathJax: issue 27). ``visit`` returns that visit's problems alone: console errors,
    page errors, failed or 4xx requests, requests leaving 127.0.0.1 and file:. Between two visits the tab
    goes to about:blank: what a page does as it is left (requests cut short) is no page's problem, as
    when a tab is closed."""

    def __init__(self, browser, width: int = 1280, height: int = 900):
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.problems: list[str] = []
        on = self.page.on
        on("console", lambda m: self.problems.append(f"console: {m.text}") if m.type == "error" else None)
        on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        on("requestfailed", lambda r: self.problems.append(f"request failed: {r.url}"))
        on("response", lambda r: self.problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
        on("request", lambda r: self.problems.append(f"network: {r.url}") if off_host(r.url) else None)

    def visit(self, url: str, settle_ms: int = 0) -> list[str]:
        """Go to ``url`` (until its load event, then ``settle_ms`` more); the list fills as the page goes on."""
        if self.page.url != "about:blank":
            self.problems = []
            self.page.goto("about:blank")
        self.problems = []
        self.page.goto(url, wait_until="load")
        if settle_ms:
            self.page.wait_for_timeout(settle_ms)
        return self.problems

    def close(self) -> None:
        self.page.close()


def off_host(url: str) -> bool:
    """A request that leaves the machine (the course is offline): not file:, data:, blob:, about: or 127.0.0.1."""
    from urllib.parse import urlparse

    u = urlparse(url)
    return u.scheme not in ("file", "data", "blob", "about") and u.hostname != "127.0.0.1"


def serve(directory: Path):
    """Serve a folder on 127.0.0.1 from a background thread; returns (base_url, server)."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


@pytest.fixture(scope="session")
def executed_notebooks(request):
    """build/executed/: waits until this run's nbval has recorded each solution copy it runs whole
    (tools/nbval_book.py; a notebook that failed there fails this fixture). The seconds waited go to
    the time budget's "waiting for nbval" (nbval_book.charge)."""
    nbval_book.charge("normlab_wait_s", nbval_book.wait_for_executions(nbval_book.recorded_stems(request.session.items)))
    return ROOT / "build" / "executed"


@contextlib.contextmanager
def once_per_run(what: str):
    """Yields True in the one process of this test run that must make ``what`` (the first xdist worker
    to ask), False where it is made already; a worker that asks while another makes it waits.

    Each worker has its own session, so two test modules on two workers would otherwise build the
    book into the same folder at the same time, and one would read pages the other is deleting.
    A lock serialises the workers; a stamp with the run's id (shared by all its workers) says the
    work is done (written only when the body returned)."""
    run_id = nbval_book.run_id()
    (ROOT / "build").mkdir(exist_ok=True)
    stamp = ROOT / "build" / f".{what}-built-by-run"
    with open(ROOT / "build" / f".{what}.lock", "w", encoding="utf-8") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        todo = not (stamp.exists() and stamp.read_text(encoding="utf-8") == run_id)
        if todo:
            stamp.unlink(missing_ok=True)
        yield todo
        if todo:
            stamp.write_text(run_id, encoding="utf-8")


def build_once(what: str) -> None:
    """Run ``tools/book.py WHAT`` once per test run, whichever pytest-xdist worker asks first
    (once_per_run). It executes only the notebooks that are not current in build/executed/ (after the
    executed_notebooks fixture: none, when this run's nbval ran them all). The seconds spent (building,
    or waiting for another worker's build) go to the time budget's "book/slides build" (nbval_book.charge)."""
    import time

    t0 = time.time()
    with once_per_run(what) as todo:
        if todo:
            subprocess.run([sys.executable, str(ROOT / "tools" / "book.py"), what], cwd=ROOT, check=True)
    nbval_book.charge("normlab_build_s", time.time() - t0)


def reuse_build(folder: Path, pattern: str) -> bool:
    """NORMLAB_REUSE_BUILD=1 and ``folder`` holds what a build makes: rerun the browser tests on the build
    already there (no notebook executed, nothing built)."""
    return os.environ.get("NORMLAB_REUSE_BUILD") == "1" and any(folder.glob(pattern))


@pytest.fixture(scope="session")
def book_url(request):
    """Build the book (once per run, from the executed notebooks) and serve it on 127.0.0.1; with
    NORMLAB_REUSE_BUILD=1, the book already in build/book/html."""
    if not reuse_build(ROOT / "build" / "book" / "html", "index.html"):
        request.getfixturevalue("executed_notebooks")
        build_once("book")
    url, server = serve(ROOT / "build" / "book" / "html")
    yield url
    server.shutdown()


@pytest.fixture(scope="session")
def slides_url(book_url):
    """Build the slides (from the same executed notebooks as the book) and serve them."""
    build_once("slides")
    url, server = serve(ROOT / "build" / "slides")
    yield url
    server.shutdown()


@pytest.fixture(scope="session")
def decks_url(request):
    """The slides on 127.0.0.1: slides_url, or with NORMLAB_REUSE_BUILD=1 the decks already in build/slides
    (to rerun the slide tests without building the book and the slides again)."""
    folder = ROOT / "build" / "slides"
    if reuse_build(folder, "*.slides.html"):
        url, server = serve(folder)
        yield url
        server.shutdown()
    else:
        yield request.getfixturevalue("slides_url")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output readable
        pass


@contextlib.contextmanager
def environ(**changes):
    """os.environ with ``changes`` (None: removed) inside the block, then as it was."""
    saved = {k: os.environ.get(k) for k in changes}
    try:
        for k, v in changes.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 over fresh .ipynb copies of the course notebooks, started by
    tools/bench_widgets.py's ``jupyterlab`` (the benchmark's server, live widgets). Its kernels keep the
    guesses in the server's folder, never in the tester's ~/.normlab, and wait at an unanswered prompt
    as a learner's do (no NORMLAB_PREDICT_WAIT)."""
    workdir = tmp_path_factory.mktemp("lab")
    subprocess.run([sys.executable, str(ROOT / "tools" / "notebooks.py"), "export", "--out", str(workdir)],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    with contextlib.ExitStack() as stack:
        try:
            with environ(NORMLAB_PREDICTIONS=str(workdir / "predictions.json"), NORMLAB_PREDICT_WAIT=None):
                base, token = stack.enter_context(bench_widgets.jupyterlab(workdir))    # the server keeps this env
        except bench_widgets.LabDidNotStart as err:
            pytest.fail(str(err))
        yield {"base": base, "token": token, "dir": workdir}


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def build_toy_site(folder: Path, pages: dict[str, tuple[str, str]]):
    """A small book and its decks built the way tools/book.py builds the course's: for each
    ``{STEM: (body, title)}``, ``folder/STEM.md`` (lesson 00's front matter, then ``body``) executed by
    execution.execute_all (NORMLAB_STATIC=1), staged with static_widgets, built by Sphinx with the book's
    settings, and exported by the slides' exporter. Returns (the book's html folder, the slides' folder,
    {STEM: the executed notebook}); a page is html/notebooks/STEM.html, a deck STEM.slides.html."""
    import copy

    import nbformat

    sys.path.insert(0, str(ROOT / "tools"))
    import book
    import execution
    import slides as decks
    import static_outputs as static

    header = (ROOT / "notebooks" / "00_course_map.md").read_text(encoding="utf-8").split("---", 2)[1]
    srcs = []
    for stem, (body, _) in pages.items():
        srcs.append(folder / f"{stem}.md")
        srcs[-1].write_text(f"---{header}---\n\n{body}", encoding="utf-8")
    executed = {stem: execution.EXECUTED / f"{stem}.ipynb" for stem in pages}
    try:
        execution.execute_all(jobs=1, srcs=srcs)
        nbs = {stem: nbformat.read(path, 4) for stem, path in executed.items()}
    finally:
        for path in executed.values():
            path.unlink(missing_ok=True)
    site = folder / "book"
    (site / "notebooks").mkdir(parents=True)
    (site / "_static").mkdir()
    (site / "_extra").mkdir()
    for name in ("_config.yml", "favicon.png"):
        (site / name).write_bytes((ROOT / "book" / name).read_bytes())
    (site / "_static" / "normlab.js").write_text(book.THEME_JS, encoding="utf-8")
    (site / "_static" / "normlab.css").write_bytes((ROOT / "book" / "normlab.css").read_bytes())  # _config.yml names it
    links = "\n".join(f"- [{title}](notebooks/{stem})" for stem, (_, title) in pages.items())
    (site / "intro.md").write_text(f"# 首页\n\n{links}\n", encoding="utf-8")
    deck = folder / "slides"
    deck.mkdir()
    decks.copy_slide_vendor(deck)
    for stem, nb in nbs.items():
        staged = copy.deepcopy(nb)
        static.static_widgets(staged)
        nbformat.write(staged, site / "notebooks" / f"{stem}.ipynb")
        (deck / f"{stem}.slides.html").write_text(decks.slides_html(decks.slides_exporter(), staged), encoding="utf-8")
    chapters = "".join(f"  - file: notebooks/{stem}\n" for stem in pages)
    (site / "_toc.yml").write_text(f"format: jb-book\nroot: intro\nchapters:\n{chapters}", encoding="utf-8")
    book.write_sphinx_conf(site)
    assert book.sphinx_build(site, site / "html") == 0
    return site / "html", deck, nbs


TOY_SITE = ROOT / "build" / "toysite"


@pytest.fixture(scope="session")
def toy_site():
    """One toy book and deck per test run for the tests that check the course's build on a page of their
    own: tests/test_browser_widgets.py's toy widget (TOY_PAGE) and tests/test_predictions.py's choices
    (PREDICT_PAGE), built by build_toy_site into build/toysite/ once (once_per_run: each Sphinx build of
    a toy book cost 8-20 s; issue 27). (the html folder, the slides' folder, {stem: executed notebook})."""
    import shutil

    import nbformat

    from test_browser_widgets import TOY_PAGE
    from test_predictions import PREDICT_PAGE

    pages = TOY_PAGE | PREDICT_PAGE
    with once_per_run("toysite") as todo:
        if todo:
            shutil.rmtree(TOY_SITE, ignore_errors=True)
            TOY_SITE.mkdir(parents=True)
            for stem, nb in build_toy_site(TOY_SITE, pages)[2].items():
                nbformat.write(nb, TOY_SITE / f"{stem}.executed.ipynb")
    return (TOY_SITE / "book" / "html", TOY_SITE / "slides",
            {stem: nbformat.read(TOY_SITE / f"{stem}.executed.ipynb", 4) for stem in pages})
