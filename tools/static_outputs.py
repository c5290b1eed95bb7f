"""The book's and the slides' rewriting of widget outputs: an executed notebook's live widget views
(which need a kernel) become static. The course's widgets are already static in an execution with
NORMLAB_STATIC=1 (text/html over a precomputed grid); tqdm progress bars become their final text
(``progress_bars_as_text``, read from the notebook's saved widget state); any other plain ipywidgets
output becomes WIDGET_NOTE."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slide_model import text_length  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


# The course's widgets (normlab.widgets.web_host) show their browser front-end over a precomputed grid
# when NORMLAB_STATIC=1 is set for the kernels (text/html, which myst-nb and nbconvert both prefer to
# the image/png beside it). A plain ipywidgets output left over (e.g. an interact()) becomes this note.
WIDGET_NOTE = ('<div class="normlab-widget-note">交互控件 (widget)：在 JupyterLab 中运行本 notebook '
               '即可拖动操作（<code>python3 run.py course</code>）；网页版请看同一节的静态图。</div>')


def static_widgets(nb: nbformat.NotebookNode) -> None:
    """Replace the live widget outputs left (plain ipywidgets, which need a kernel) by a note; the
    course's widgets are already static (text/html over a grid), the figures stay. Progress bars
    (tqdm) become their final text first (progress_bars_as_text, with the slides' code below)."""
    progress_bars_as_text(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for i, out in enumerate(cell.get("outputs", [])):
            if WIDGET_MIME in out.get("data", {}):
                cell.outputs[i] = nbformat.v4.new_output("display_data", data={"text/html": WIDGET_NOTE})


def progress_text(state: dict, model_id: str) -> str | None:
    """The final text of a tqdm.auto progress bar (an ipywidgets HBox of HTML, FloatProgress, HTML in
    the notebook's widget state), e.g. "train: 100% 300/300"; None for any other widget."""
    box = state.get(model_id, {})
    kids = [state.get(k.removeprefix("IPY_MODEL_"), {}) for k in box.get("state", {}).get("children", [])]
    if box.get("model_name") != "HBoxModel" or [k.get("model_name") for k in kids] != \
            ["HTMLModel", "FloatProgressModel", "HTMLModel"]:
        return None
    import html as htmllib
    left = htmllib.unescape(kids[0]["state"].get("value", "")).replace("\u2007", " ").strip()
    desc = re.sub(r"\s*\d+%\s*$", "", left).rstrip(": ").strip()
    bar = kids[1]["state"]
    n, total = bar.get("value", 0) or 0, bar.get("max", 0) or 0
    percent = f"{100 * n / total:.0f}%" if total else ""
    count = f"{n:g}/{total:g}" if total else f"{n:g}"
    failed = "（中断 interrupted）" if bar.get("bar_style") == "danger" else ""
    return f"{desc}: {percent} {count}{failed}".strip() if desc else f"{percent} {count}{failed}".strip()


def progress_bars_as_text(nb: nbformat.NotebookNode) -> int:
    """Replace each tqdm progress-bar widget output by its final text (consecutive bars of a cell become
    one block of lines), before the widget state is dropped. Returns how many bars were replaced."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    replaced = 0
    for cell in nb.cells:
        outputs, lines = [], []
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_MIME)
            text = progress_text(state, view["model_id"]) if view else None
            if text is not None:
                lines.append(text)
                replaced += 1
                continue
            if lines:
                outputs.append(progress_output(lines))
                lines = []
            outputs.append(out)
        if lines:
            outputs.append(progress_output(lines))
        if "outputs" in cell:
            cell.outputs = outputs
    return replaced


def progress_output(lines: list[str]):
    """Progress lines as one block, in as many columns as fit (CSS columns; one where they are long)."""
    import html as htmllib
    body = "\n".join(htmllib.escape(line) for line in lines)
    width = max(text_length(line) * 2 + 3 for line in lines)
    return nbformat.v4.new_output("display_data", data={
        "text/html": f'<pre class="normlab-progress" style="column-width: {width:.0f}ch">{body}</pre>',
        "text/plain": "\n".join(lines)})
