"""The 先想一想 choice widget and the lesson's summary of the guesses (issue 28 item 2).

    predict.ask("01", "depth-std")         # right after a prompt (the export inserts it): pick an option
    await predict.ask("01", "depth-std")   # the learner copy's form: the run waits here for the guess
    predict.summary("01")                  # at the end of the lesson: right / wrong per prompt

One front-end, web/predict.js (spec["kind"]: "ask" or "summary"). In JupyterLab (a kernel) a pick goes
to Python, which writes it to ~/.normlab/predictions.json (normlab.course.predictions.store_path) and
the summary reads that file. In the book and the slides (no kernel) the page keeps the guesses in the
browser's localStorage and the summary reads them there. Nothing is written when a widget is drawn:
only a learner's click writes (opening a notebook never changes anything).

The prompt's answer fold (marked at export, normlab.course.predictions.answer_marker) stays shut until a choice
is made: in JupyterLab until the kernel has the pick, in the book until localStorage has it. It opens
as before where the widget is not on the page or the browser cannot store a guess, and in the slides:
the teacher reveals the answer to the class, whose guesses are not the teacher's browser's.

Waiting for the guess (issue 36): ``await predict.ask(...)`` draws the widget and, while the prompt has
no guess, keeps the cell running, with one line under the widget, until the learner picks; so Run All
runs no experiment past an unanswered prompt and goes on after the pick. The kernel handles the pick
meanwhile: ipykernel dispatches comm messages while a cell awaits (``Kernel.dispatch_shell``'s
``concurrent`` parameter, ipykernel >= 7.4). An older ipykernel cannot, so there the cell ends at once
with a one-line error (PredictionPending: Run All stops; after the pick the learner runs on). An
interrupt ends the wait with one line too. No wait where nobody can pick: NORMLAB_PREDICT_WAIT=0 (the
test run, the book, the sweep), the static widget (NORMLAB_STATIC=1), outside a kernel.

The class's bars (issue 39): under a hub that runs the class service (normlab/classroom/), the kernel's
environment says where it is (NORMLAB_CLASSROOM_URL, set by the hub's configuration, and the hub's own
JUPYTERHUB_SERVICE_PREFIX / JUPYTERHUB_BASE_URL); ``Ask.classroom`` is then the service's path as the
learner's browser reaches it (same origin as JupyterLab, through the hub's proxy), and web/predict.js
loads the service's front end once per page (api/session.js?login=1, then static/classroom.js), which
draws the class's bars under a prompt after the learner's guess and opens the answer fold when the
teacher reveals it. Anywhere else (one machine, the book, the slides, a hub without the service) the
trait is "" and the page requests nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import threading
from urllib.parse import urlparse

import traitlets

from ..course import predictions as data
from . import web_host

__all__ = ["Ask", "Summary", "PredictionPending", "ask", "summary"]

TITLE = "你的预测 (your prediction)"
SUMMARY_TITLE = "这一课的预测 (your predictions in this lesson)"
# One line each (no emoji: a system without an emoji font shows a box).
WAITING = "运行停在这里 (paused)：先在上面选一个预测，选好后接着运行下面的实验。(pick a guess above; the run goes on after it)"
RUNNING_ON = "已记录 ({choice})。下面的实验接着运行（一格一格运行时，运行下一格）。(guess saved: the experiment below runs next)"
STOPPED = ("运行停在这个预测题 (stopped)：先在上面选一个预测，再运行下面的格子（Run → Run Selected Cell and All Below）。"
           "(pick a guess, then run on)")
INTERRUPTED = "已中断 (interrupted)：这个预测题还没有选；选好之后再运行下面的格子。(no guess yet)"
POLL_S = 0.1


class PredictionPending(Exception):
    """Run All stops at an unanswered prompt: one line, no traceback (IPython shows the lines of
    ``_render_traceback_`` instead of one)."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def _kernel():
    """The running ipykernel, or None (plain Python, a terminal IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return getattr(shell, "kernel", None) if shell is not None else None


def kernel_handles_picks_while_waiting(kernel) -> bool:
    """Does this ipykernel dispatch comm messages while a cell awaits (ipykernel >= 7.4)?"""
    dispatch = getattr(type(kernel), "dispatch_shell", None)
    try:
        return dispatch is not None and "concurrent" in inspect.signature(dispatch).parameters
    except (TypeError, ValueError):
        return False


def _where() -> str:
    path = data.store_path()
    try:
        return "~/" + path.relative_to(path.home()).as_posix()
    except ValueError:
        return str(path)


def classroom_base(environ=None) -> str:
    """The class service's path as a learner's browser reaches it ("/services/normlab-classroom/"), or ""
    where there is none: no NORMLAB_CLASSROOM_URL, not a hub's single-user server (no
    JUPYTERHUB_SERVICE_PREFIX), or the book's and the slides' executors (NORMLAB_STATIC=1)."""
    env = os.environ if environ is None else environ
    url = env.get("NORMLAB_CLASSROOM_URL", "").strip()
    if not url or not env.get("JUPYTERHUB_SERVICE_PREFIX", "").strip() or env.get("NORMLAB_STATIC") == "1":
        return ""
    path = urlparse(url).path or "/"                 # the kernel's URL is the service's own address; the
    base = env.get("JUPYTERHUB_BASE_URL", "/").strip() or "/"     # browser goes through the hub's proxy
    if not path.startswith(base):
        path = base.rstrip("/") + "/" + path.lstrip("/")
    return path if path.endswith("/") else path + "/"


class Ask(web_host.WebWidget):
    """One prompt's options; ``controls`` = {"choice": "" or a key}. A change from the front-end (or
    ``choose()``) saves the guess; the initial value is the saved one, if any. ``classroom``: the class
    service's path for the browser, "" without one (classroom_base)."""

    web_name = "predict"
    classroom = traitlets.Unicode("").tag(sync=True)

    def __init__(self, lesson: str, pid: str) -> None:
        self.entry = data.entry(lesson, pid)           # a PredictionError (Chinese) for an unknown prompt
        self.key = f"{lesson}.{pid}"
        self._live, self._picked = False, ""
        stored = data.load_guesses().get(self.key, {}).get("choice", "")
        self._saved = stored if stored in self.entry["keys"] else ""
        super().__init__(spec=self._spec(), controls={"choice": self._saved}, classroom=classroom_base())
        self._live = True

    def _spec(self) -> dict:
        e = self.entry
        return {"kind": "ask", "title": TITLE, "key": self.key, "ask": e.get("ask", ""),
                "control_order": ["choice"],
                "options": [{"key": k, "text": t} for k, t in zip(e["keys"], e["options"])],
                "answer": e["answer"],            # for the verdict an opened fold shows (the fold holds the answer too)
                "hidden_line": data.HIDDEN_LINE, "ask_line": data.ASK_LINE, "discussion_class": data.DISCUSSION_CLASS,
                "storage_key": data.STORAGE_KEY,
                "where_live": _where(), "where_grid": "这个浏览器 (localStorage)"}

    def compute(self, controls: dict) -> dict:
        choice = controls.get("choice", "")
        if choice not in ["", *self.entry["keys"]]:
            raise ValueError(f"选项 (option) 只能是 {'、'.join(self.entry['keys'])}，收到 {choice!r}")
        return {"choice": choice, "saved": bool(choice) and choice == self._saved}

    def grid_controls(self) -> list[dict]:
        return [{"choice": ""}] + [{"choice": k} for k in self.entry["keys"]]

    @traitlets.observe("controls")
    def _on_controls(self, change) -> None:
        choice = change["new"].get("choice", "")
        if self._live and choice in self.entry["keys"]:
            self._picked = choice
        if self._live and choice in self.entry["keys"] and choice != self._saved:
            try:
                data.save_guess(*self.key.split(".", 1), choice)
            except OSError as err:
                self.error = f"预测没有保存 (could not save the guess)：{err}"
                return
            self._saved = choice
        super()._on_controls(change)

    def choose(self, choice: str) -> dict:
        """Pick an option from Python (as a click would); returns the new data."""
        return self.set_controls(choice=choice)

    def __await__(self):
        return self._wait().__await__()

    async def _wait(self) -> None:
        """``await predict.ask(...)``: draw the widget; while the prompt has no guess, wait for the pick
        (module docstring). Returns None, so the cell shows the widget once."""
        from IPython.display import display

        from .web_host import static_mode

        display(self)
        kernel = _kernel()
        if self._saved or not data.waits() or static_mode() or kernel is None:
            return None
        if not kernel_handles_picks_while_waiting(kernel):
            raise PredictionPending(STOPPED)
        stopped = []
        main = threading.current_thread() is threading.main_thread()
        # the handler first, then the line: an interrupt right after the learner sees "paused" is caught
        # (the other way round one landed between the two and surfaced as CancelledError)
        old = signal.signal(signal.SIGINT, lambda *_: stopped.append(True)) if main else None
        try:
            line = display({"text/plain": WAITING}, raw=True, display_id=True)
            while not self._picked and not stopped:
                await asyncio.sleep(POLL_S)
        finally:
            if main:
                signal.signal(signal.SIGINT, old if old is not None else signal.default_int_handler)
        if not self._picked:
            line.update({"text/plain": ""}, raw=True)          # the error says it, once
            raise PredictionPending(INTERRUPTED)
        line.update({"text/plain": RUNNING_ON.format(choice=self._picked)}, raw=True)
        return None

    def caption(self) -> str:
        opts = "；".join(f"({k}) {t}" for k, t in zip(self.entry["keys"], self.entry["options"]))
        chosen = f"已记录 (saved)：{self._saved}" if self._saved else "还没有选 (no guess yet)"
        return f"{TITLE} {self.key}：{opts}。{chosen}"

    def _repr_mimebundle_(self, **kwargs):
        return web_host.mimebundle(self)


class Summary(web_host.WebWidget):
    """Right / wrong per prompt of a lesson; ``controls`` = {"refresh": n} (any change reads the file again)."""

    web_name = "predict"

    def __init__(self, lesson: str) -> None:
        self.lesson = lesson
        if not data.entries(lesson):
            raise data.PredictionError(f"第 {lesson} 课没有预测题 (no prompts in lesson {lesson})")
        super().__init__(spec=self._spec(), controls={"refresh": 0})

    def _spec(self) -> dict:
        return {"kind": "summary", "title": SUMMARY_TITLE, "lesson": self.lesson, "control_order": ["refresh"],
                "prompts": [{"key": f"{self.lesson}.{e['id']}", "id": e["id"], "answer": e["answer"], "starts": e["starts"],
                             "options": [{"key": k, "text": t} for k, t in zip(e["keys"], e["options"])]}
                            for e in data.entries(self.lesson)],
                "storage_key": data.STORAGE_KEY, "where_live": _where(), "where_grid": "这个浏览器 (localStorage)"}

    def compute(self, controls: dict) -> dict:
        guesses = data.load_guesses()
        keys = {p["key"] for p in self.spec["prompts"]} if self.spec else set()
        return {"guesses": {k: v["choice"] for k, v in guesses.items() if k in keys}}

    def grid_controls(self) -> list[dict]:
        return [{"refresh": 0}]

    def static_grid(self) -> dict[str, dict]:
        return {"0": {"guesses": {}}}        # no kernel: the page reads the browser's own guesses

    def rows(self) -> list[dict]:
        return data.score(self.lesson, data.load_guesses())

    def caption(self) -> str:
        rows = self.rows()
        done = [r for r in rows if r["right"] is not None]
        right = sum(bool(r["right"]) for r in done)
        lines = [f"{SUMMARY_TITLE}：{len(done)} 题有预测 (guessed)，{right} 题对 (right)，"
                 f"{len(rows) - len(done)} 题没有预测 (no guess)"]
        for i, r in enumerate(rows, 1):
            if r["right"] is None:                      # no guess: no answer either
                lines.append(f"  {i}. {r['id']}: 没有预测 (no guess)")
                continue
            verdict = "对 right" if r["right"] else "错 wrong"
            lines.append(f"  {i}. {r['id']}: 你的预测 {r['choice']}，答案 {r['answer']}，{verdict}")
        return "\n".join(lines)

    def _repr_mimebundle_(self, **kwargs):
        return web_host.mimebundle(self)


def ask(lesson: str, pid: str) -> Ask:
    return Ask(lesson, pid)


def summary(lesson: str) -> Summary:
    return Summary(lesson)
