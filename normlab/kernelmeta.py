"""The notebook metadata a Python kernel would write itself (issue 28 item 5: opening a lesson in
JupyterLab marked it unsaved at once).

On opening a notebook JupyterLab sets ``kernelspec`` (name, the installed spec's display_name,
language) and ``language_info`` (the kernel's kernel_info reply) in the notebook's metadata; when
either differs from what the file holds, the notebook is changed, and shown unsaved, before the
learner does anything. The sources say ``display_name: Python 3`` and hold no ``language_info``;
ipykernel's spec is "Python 3 (ipykernel)" and its language_info names the running Python's version.
``kernel_metadata()`` is what that kernel would write, for the Python that exports the course (the
one the learner's JupyterLab runs: run.py course and normlab-course init use it). Core, no torch;
jupyter_client only when installed (else ipykernel's default display name).
"""

from __future__ import annotations

import platform
import sys
from functools import lru_cache

DEFAULT_DISPLAY_NAME = "Python 3 (ipykernel)"     # ipykernel >= 6's kernel.json


@lru_cache(maxsize=None)
def _spec(name: str) -> tuple[str, str]:
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        spec = KernelSpecManager().get_kernel_spec(name)
        return spec.display_name, spec.language or "python"
    except Exception:  # noqa: BLE001 - no jupyter_client, no such spec: ipykernel's defaults
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
