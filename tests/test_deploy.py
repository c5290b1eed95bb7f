"""deploy/: what cannot run here (systemd, Docker, Kubernetes) is at least checked here.

* The Littlest JupyterHub: deploy/tljh/normlab.py is loaded as JupyterHub loads it, and its server command
  is run for real by /bin/sh, with the course's venv in place of /opt/tljh/user and a stand-in for
  jupyterhub-singleuser: the learner's workspace is written under a HOME with Chinese characters and a
  space, and JupyterHub's arguments reach the server unchanged. install.sh passes `sh -n`.
* Zero to JupyterHub: values.yaml parses and initialises each learner's copy; the Dockerfile's pip lines
  install run.py's tested torch (inside pyproject's range) and nothing the package does not declare.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
VENV_BIN = Path(sys.executable).parent


def torch_run_py_installs() -> str:
    """The torch version run.py installs on the course machines (requirements-tested.txt)."""
    text = (ROOT / "requirements-tested.txt").read_text(encoding="utf-8")
    return re.search(r"^torch==([\w.]+)", text, re.M).group(1)


def declared() -> dict[str, str]:
    """pyproject's dependencies: name -> specifier."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    out = {}
    for d in deps:
        name = re.match(r"[A-Za-z0-9_.-]+", d).group(0).lower()
        out[name] = d[len(name):].strip()
    return out


def load_tljh_config(user_env: Path):
    from traitlets.config import Config

    c = Config()
    source = (DEPLOY / "tljh" / "normlab.py").read_text(encoding="utf-8")
    source = source.replace('USER_ENV = "/opt/tljh/user/bin"', f"USER_ENV = {str(user_env)!r}")
    exec(compile(source, "normlab.py", "exec"), {"c": c})
    return c


def test_tljh_server_command_writes_the_workspace_then_starts_the_server(tmp_path):
    user_env = tmp_path / "user env"
    user_env.mkdir()
    (user_env / "normlab-course").symlink_to(VENV_BIN / "normlab-course")
    fake = user_env / "jupyterhub-singleuser"          # stands in for the server: prints what it was given
    fake.write_text('#!/bin/sh\necho "SERVER $*"\n', encoding="utf-8")
    fake.chmod(0o755)
    c = load_tljh_config(user_env)
    home = tmp_path / "张三 的家"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
    env.pop("NORMLAB_WORKSPACE", None)
    cmd = list(c.Spawner.cmd) + ["--port=8888", "--SingleUserNotebookApp.default_url=/lab"]
    out = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "SERVER --port=8888 --SingleUserNotebookApp.default_url=/lab" in out.stdout
    ws = home / "normlab-course"
    assert (ws / "00_course_map.ipynb").exists()
    # a second start overwrites nothing a learner wrote
    (ws / "00_course_map.ipynb").write_text("my work", encoding="utf-8")
    assert subprocess.run(cmd, capture_output=True, env=env, timeout=300).returncode == 0
    assert (ws / "00_course_map.ipynb").read_text(encoding="utf-8") == "my work"
    assert c.Spawner.default_url == "/lab/tree/normlab-course/00_course_map.ipynb"
    assert c.Spawner.environment["OMP_NUM_THREADS"] == "1"


def test_tljh_install_script_is_valid_and_installs_the_torch_run_py_installs():
    script = DEPLOY / "tljh" / "install.sh"
    assert subprocess.run(["sh", "-n", str(script)], capture_output=True).returncode == 0
    assert f'"torch=={torch_run_py_installs()}"' in script.read_text(encoding="utf-8")


def test_z2jh_values_initialise_each_learners_copy():
    yaml = pytest.importorskip("yaml")
    values = yaml.safe_load((DEPLOY / "z2jh" / "values.yaml").read_text(encoding="utf-8"))
    single = values["singleuser"]
    command = " ".join(single["lifecycleHooks"]["postStart"]["exec"]["command"])
    assert "normlab-course init" in command and "$HOME/normlab-course" in command
    assert single["defaultUrl"] == "/lab/tree/normlab-course/00_course_map.ipynb"
    assert single["extraEnv"]["OMP_NUM_THREADS"] == "1"


def test_dockerfile_pip_lines_match_the_package():
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    text = (DEPLOY / "z2jh" / "Dockerfile").read_text(encoding="utf-8")
    pip_lines = [line for line in text.splitlines() if "pip install" in line]
    installed = re.findall(r'"([A-Za-z0-9_.-]+)([=<>!~][^"]*)"', " ".join(pip_lines))
    names = {name.lower(): spec for name, spec in installed}
    assert names["torch"] == f"=={torch_run_py_installs()}"
    assert Version(torch_run_py_installs()) in SpecifierSet(declared()["torch"])
    assert set(names) - set(declared()) <= {"nbgitpuller"}, names
    assert any("normlab-*.whl" in line for line in pip_lines)
    base = re.search(r"^FROM \S+python-(3\.\d+)", text, re.M).group(1)
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    assert Version(base) in SpecifierSet(requires)


def test_the_instructor_sizing_table_is_the_measurement():
    """book/instructor.md's table (K learners running lesson 01 at once through the hub) is deploy/sizing.json,
    written by `python3 tools/hub.py sizing --learners 1 2 4` on the course's 2-core machine."""
    import json

    d = json.loads((DEPLOY / "sizing.json").read_text(encoding="utf-8"))
    guide = (ROOT / "book" / "instructor.md").read_text(encoding="utf-8")
    assert sorted({r["K"] for r in d["rows"]}) == [1, 2, 4] and not any(r["error"] for r in d["rows"])
    for k in (1, 2, 4):
        rs = [r for r in d["rows"] if r["K"] == k]
        secs, mem = [r["seconds"] for r in rs], [r["peak_mb"] for r in rs]
        row = f"| {k} | {min(secs):.1f}–{max(secs):.1f} | {min(mem):.0f}–{max(mem):.0f} |"
        assert row in guide, row
