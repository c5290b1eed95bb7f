"""The README's first command really opens the course: `python3 run.py course` serves notebook 00."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import free_port

ROOT = Path(__file__).resolve().parent.parent


def test_course_command_serves_the_first_notebook_from_workspace():
    port, token = free_port(), secrets.token_hex(8)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), "course", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        url = f"http://127.0.0.1:{port}/api/contents/00_course_map.ipynb?token={token}"  # root: workspace/
        for _ in range(120):
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(url, timeout=2) as resp:
                    model = json.load(resp)
                break
            time.sleep(0.5)
        else:
            raise AssertionError("run.py course did not serve the notebook")
        assert model["type"] == "notebook" and model["content"]["cells"]
        sources = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.md"))
        assert all((ROOT / "workspace" / f"{s}.ipynb").exists() for s in sources)
    finally:
        proc.terminate()
        out = proc.communicate(timeout=20)[0]
    assert "workspace/00_course_map.ipynb" in out  # it told the learner where they are
