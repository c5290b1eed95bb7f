"""The notebook metadata a Python kernel would write itself (issue 28 item 5: opening a lesson in
JupyterLab marked it unsaved at once).

On opening a notebook JupyterLab sets ``kernelspec`` (name, the installed spec's display_name,
language) and ``language_info`` (the kernel's kernel_info reply) in the notebook's metadata; when
either differs from what the file holds, the notebook is changed, and shown unsaved, before the
learner does anything. The sources say ``display_name: Python 3`` and hold no ``language_info``;
ipykernel's spec is "Python 3 (ipykernel)" and its language_info names the running Python's version.
``kernel_metadata()`` is what that kernel would write, for the Python that exports the course (the
one the learner's JupyterLab runs: run.py course and normlab-course init use it). No torch;
the spec's kernel.json where one is installed (else ipykernel's own display name).
"""

from __future__ import annotations

import json
import platform
import sys
from functools import lru_cache
from pathlib import Path

DEFAULT_DISPLAY_NAME = "Python 3 (ipykernel)"     # ipykernel >= 6's kernel.json


@lru_cache(maxsize=None)
def _spec(name: str) -> tuple[str, str]:
    """(display_name, language) of the installed kernel spec ``name``, read from its kernel.json on
    Jupyter's data path (as jupyter_client finds it, without its machinery, which creates ~/.ipython);
    ipykernel's own spec when none is installed."""
    try:
        from jupyter_core.paths import jupyter_path
    except ImportError:
        return DEFAULT_DISPLAY_NAME, "python"
    for folder in jupyter_path("kernels"):
        spec = Path(folder) / name / "kernel.json"
        if spec.is_file():
            try:
                data = json.loads(spec.read_text(encoding="utf-8"))
                return str(data.get("display_name", DEFAULT_DISPLAY_NAME)), str(data.get("language", "python"))
            except (OSError, ValueError):
                break
    return DEFAULT_DISPLAY_NAME, "python"


def kernel_metadata(name: str = "python3") -> dict:
    """{"kernelspec": ..., "language_info": ...} as ipykernel (IPythonKernel.language_info) reports them."""
    display_name, language = _spec(name)
    return {
        "kernelspec": {"name": name, "display_name": display_name, "language": language},
        "language_info": {"name": "python", "version": platform.python_version(), "mimetype": "text/x-python",
                          "codemirror_mode": {"name": "ipython", "version": sys.version_info[0]},
                          "pygments_lexer": f"ipython{sys.version_info[0]}", "nbconvert_exporter": "python",
                          "file_extension": ".py"},
    }
