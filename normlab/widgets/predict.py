"""The 先想一想 choice widget and the lesson's summary of the guesses (issue 28 item 2).

    predict.ask("01", "depth-std")   # right after a prompt (the export inserts it): pick an option
    predict.summary("01")            # at the end of the lesson: right / wrong per prompt

One front-end, web/predict.js (spec["kind"]: "ask" or "summary"). In JupyterLab (a kernel) a pick goes
to Python, which writes it to ~/.normlab/predictions.json (normlab.predictions.store_path) and
the summary reads that file. In the book and the slides (no kernel) the page keeps the guesses in the
browser's localStorage and the summary reads them there. Nothing is written when a widget is drawn:
only a learner's click writes (opening a notebook never changes anything).

The prompt's answer fold (marked at export, normlab.predictions.answer_marker) stays shut until a choice
is made: in JupyterLab until the kernel has the pick, in the book until localStorage has it. It opens
as before where the widget is not on the page or the browser cannot store a guess, and in the slides:
the teacher reveals the answer to the class, whose guesses are not the teacher's browser's.
"""

from __future__ import annotations

import traitlets

from .. import predictions as data
from . import web_host

__all__ = ["Ask", "Summary", "ask", "summary"]

TITLE = "你的预测 (your prediction)"
SUMMARY_TITLE = "这一课的预测 (your predictions in this lesson)"


def _where() -> str:
    path = data.store_path()
    try:
        return "~/" + path.relative_to(path.home()).as_posix()
    except ValueError:
        return str(path)


class Ask(web_host.WebWidget):
    """One prompt's options; ``controls`` = {"choice": "" or a key}. A change from the front-end (or
    ``choose()``) saves the guess; the initial value is the saved one, if any."""

    web_name = "predict"

    def __init__(self, lesson: str, pid: str) -> None:
        self.entry = data.entry(lesson, pid)           # a PredictionError (Chinese) for an unknown prompt
        self.key = f"{lesson}.{pid}"
        self._live = False
        stored = data.load_guesses().get(self.key, {}).get("choice", "")
        self._saved = stored if stored in self.entry["keys"] else ""
        super().__init__(spec=self._spec(), controls={"choice": self._saved})
        self._live = True

    def _spec(self) -> dict:
        e = self.entry
        return {"kind": "ask", "title": TITLE, "key": self.key, "ask": e.get("ask", ""),
                "control_order": ["choice"],
                "options": [{"key": k, "text": t} for k, t in zip(e["keys"], e["options"])],
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
            verdict = "—" if r["right"] is None else ("对 right" if r["right"] else "错 wrong")
            lines.append(f"  {i}. {r['id']}: 你的预测 {r['choice'] or '—'}，答案 {r['answer']}，{verdict}")
        return "\n".join(lines)

    def _repr_mimebundle_(self, **kwargs):
        return web_host.mimebundle(self)


def ask(lesson: str, pid: str) -> Ask:
    return Ask(lesson, pid)


def summary(lesson: str) -> Summary:
    return Summary(lesson)
