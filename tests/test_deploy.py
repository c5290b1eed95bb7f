"""deploy/: what cannot run here (systemd, Docker, Kubernetes) is at least checked here.

* The Littlest JupyterHub: deploy/tljh/normlab.py is loaded as JupyterHub loads it, and its server command
  is run for real by /bin/sh, with the course's venv in place of /opt/tljh/user and a stand-in for
  jupyterhub-singleuser: the learner's workspace is written under a HOME with Chinese characters and a
  space, and JupyterHub's arguments reach the server unchanged. install.sh passes `sh -n`.
* Zero to JupyterHub: values.yaml parses and initialises each learner's copy; the Dockerfile's pip lines
  install run.py's tested torch (inside pyproject's range) and nothing the package does not declare.
  The hub image (Dockerfile.hub) installs the wheel without its dependencies: the class service and the hub
  configuration values.yaml runs import with torch, numpy, matplotlib and JupyterLab blocked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
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


def load_tljh_config(user_env: Path, config=None):
    """deploy/tljh/normlab.py loaded as JupyterHub loads a file of jupyterhub_config.d (exec with `c`),
    with NORMLAB_USER_ENV pointing at `user_env` (its only setting that differs from a TLJH server)."""
    from traitlets.config import Config

    c = config or Config()
    old = os.environ.get("NORMLAB_USER_ENV")
    os.environ["NORMLAB_USER_ENV"] = str(user_env)
    try:
        source = (DEPLOY / "tljh" / "normlab.py").read_text(encoding="utf-8")
        namespace = {"c": c}
        exec(compile(source, "normlab.py", "exec"), namespace)
    finally:
        os.environ.pop("NORMLAB_USER_ENV") if old is None else os.environ.__setitem__("NORMLAB_USER_ENV", old)
    return c, namespace


def fake_user_env(tmp_path: Path, course_command: bool = True) -> Path:
    """A user environment with the course's real command and a stand-in for the server, which prints what
    it was given: its arguments, the page it opens, its umask and PATH's first entry."""
    user_env = tmp_path / "user env"
    user_env.mkdir()
    if course_command:
        (user_env / "normlab-course").symlink_to(VENV_BIN / "normlab-course")
    fake = user_env / "jupyterhub-singleuser"
    fake.write_text('#!/bin/sh\necho "SERVER $*"\necho "URL ${JUPYTERHUB_DEFAULT_URL:-}"\necho "UMASK $(umask)"\n'
                    'echo "PATH1 ${PATH%%:*}"\n', encoding="utf-8")
    fake.chmod(0o755)
    return user_env


def start_server(c, home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(home), PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
               JUPYTERHUB_DEFAULT_URL=c.Spawner.default_url)
    env.pop("NORMLAB_WORKSPACE", None)
    cmd = list(c.Spawner.cmd) + ["--port=8888", "--SingleUserNotebookApp.default_url=/lab"]
    return subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", env=env, timeout=300)


def test_tljh_server_command_writes_the_workspace_then_starts_the_server(tmp_path):
    user_env = fake_user_env(tmp_path)
    c, _ = load_tljh_config(user_env)
    home = tmp_path / "张三 的家"
    home.mkdir()
    out = start_server(c, home)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--port=8888 --SingleUserNotebookApp.default_url=/lab" in out.stdout
    # terminals: a plain interactive bash, which keeps the server's PATH (a login shell's /etc/profile resets
    # it on Debian); the course's commands first on that PATH; everything the server writes private
    assert "SERVER --ServerApp.terminado_settings=shell_command=/bin/bash --port=8888" in out.stdout
    assert f"PATH1 {user_env}" in out.stdout and "UMASK 0077" in out.stdout
    assert "URL /lab/tree/normlab-course/00_course_map.ipynb" in out.stdout
    ws = home / "normlab-course"
    assert (ws / "00_course_map.ipynb").exists()
    # a second start overwrites nothing a learner wrote
    (ws / "00_course_map.ipynb").write_text("my work", encoding="utf-8")
    assert start_server(c, home).returncode == 0
    assert (ws / "00_course_map.ipynb").read_text(encoding="utf-8") == "my work"
    assert c.Spawner.environment["OMP_NUM_THREADS"] == "1"


def test_the_server_starts_when_init_fails_and_tells_the_learner_why(tmp_path):
    user_env = fake_user_env(tmp_path)
    c, ns = load_tljh_config(user_env)
    home = tmp_path / "home"
    home.mkdir()
    (home / "normlab-course").write_text("a file where the workspace should be", encoding="utf-8")
    out = start_server(c, home)
    note = home / ns["FAILURE_NOTE"]
    assert out.returncode == 0 and "SERVER " in out.stdout, out.stderr[-2000:]     # the server started anyway
    assert f"URL /lab/tree/{note.name}" in out.stdout                               # ... and opens the note
    text = note.read_text(encoding="utf-8")
    assert "normlab-course init" in text and "Error" in text and "老师" in text     # what failed, who to tell
    assert "Traceback" in out.stderr                                                # the log has the detail
    # fixed: the next start writes the workspace, removes the note and opens lesson 00 again
    (home / "normlab-course").unlink()
    out = start_server(c, home)
    assert "URL /lab/tree/normlab-course/00_course_map.ipynb" in out.stdout and not note.exists()
    # a broken install (no normlab-course at all): the server still starts, with a note of the shell's own
    (tmp_path / "broken").mkdir()
    c2, _ = load_tljh_config(fake_user_env(tmp_path / "broken", course_command=False))
    home2 = tmp_path / "home2"
    home2.mkdir()
    out = start_server(c2, home2)
    assert out.returncode == 0 and f"URL /lab/tree/{note.name}" in out.stdout
    assert "老师" in (home2 / note.name).read_text(encoding="utf-8")


def test_the_server_command_survives_systemdspawner_and_systemd():
    """TLJH spawns with SystemdSpawner, which passes every word of Spawner.cmd through
    str.format(USERNAME=..., USERID=...) (jupyterhub/systemdspawner@2f6bde8a, v1.0.2, systemdspawner.py:
    `cmd=[self._expand_user_vars(c) for c in self.cmd]`, `_expand_user_vars`: `string.format(...)`); the
    tests' hubs use LocalProcessSpawner, which does not. A shell group `{ ...; }` raised KeyError there, so
    no learner's server started. systemd's ExecStart= then expands "${NAME}" and turns "$$" into "$"."""
    c, _ = load_tljh_config(Path("/opt/tljh/user/bin"))
    for word in c.Spawner.cmd:
        assert word.format(USERNAME="jupyter-20240001", USERID=1001) == word, word
        assert "${" not in word and "$$" not in word, word


def test_the_limits_are_tljh_configs_not_this_files():
    """TLJH applies `tljh-config set limits.*` (configurer.update_limits: c.Spawner.mem_limit / cpu_limit)
    BEFORE it loads jupyterhub_config.d/*.py: any limit set in normlab.py would silently win."""
    from traitlets.config import Config

    c = Config()
    c.Spawner.mem_limit, c.Spawner.cpu_limit = "3G", 1.5          # what tljh-config set
    c, _ = load_tljh_config(Path("/opt/tljh/user/bin"), c)
    assert (c.Spawner.mem_limit, c.Spawner.cpu_limit) == ("3G", 1.5)
    assert "mem_limit" not in c.SystemdSpawner and "cpu_limit" not in c.SystemdSpawner


def private_repo_copy(tmp_path: Path) -> Path:
    """What install.sh needs of the repository, in a folder only its owner reads (as the guide says)."""
    repo = tmp_path / "repo"
    for rel in ("deploy/tljh/install.sh", "deploy/tljh/normlab.py", "deploy/sizing.json", "book/glossary.md"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, repo / rel)
    shutil.copytree(ROOT / "notebooks", repo / "notebooks")
    repo.chmod(0o700)
    return repo


def stand_ins(tmp_path: Path) -> tuple[Path, Path, dict]:
    """TLJH_PREFIX with a user environment whose pip records its arguments (python is the real one) and a
    tljh-config on PATH that records its own; the admin's HOME has a space in it."""
    prefix, bin_ = tmp_path / "tljh", tmp_path / "bin"
    (prefix / "user" / "bin").mkdir(parents=True)
    bin_.mkdir()
    log = tmp_path / "calls.log"
    for where, name in ((prefix / "user" / "bin", "pip"), (bin_, "tljh-config")):
        (where / name).write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\n', encoding="utf-8")
        (where / name).chmod(0o755)
    (prefix / "user" / "bin" / "python").symlink_to(sys.executable)
    admin = tmp_path / "admin home"
    admin.mkdir()
    env = dict(os.environ, TLJH_PREFIX=str(prefix), HOME=str(admin), PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}")
    return prefix, log, env


def test_tljh_install_script_installs_cpu_torch_the_course_and_tljhs_limits(tmp_path):
    script = DEPLOY / "tljh" / "install.sh"
    assert subprocess.run(["sh", "-n", str(script)], capture_output=True).returncode == 0
    repo = private_repo_copy(tmp_path)
    prefix, log, env = stand_ins(tmp_path)
    wheel = tmp_path / "normlab-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    out = subprocess.run(["sh", str(repo / "deploy/tljh/install.sh"), "course", str(wheel)], env=env,
                         capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    calls = log.read_text(encoding="utf-8").splitlines()
    rule = json.loads((DEPLOY / "sizing.json").read_text(encoding="utf-8"))["rule"]
    torch = next(c for c in calls if "torch==" in c)
    assert f"torch=={torch_run_py_installs()}" in torch and "--index-url https://download.pytorch.org/whl/cpu" in torch
    assert "--extra-index-url" not in torch                 # no second index: never the CUDA build from PyPI
    assert calls.index(torch) < calls.index(f"pip install {wheel}")
    # pip skips a local wheel of an installed version (pip's resolvelib/resolver.py: "already installed with
    # the same version as the provided wheel"): the course's own files are forced in, without its dependencies
    assert calls.index(f"pip install {wheel}") < calls.index(f"pip install --no-deps --force-reinstall {wheel}")
    assert "pip uninstall -y -q rfc3987-syntax" in calls
    assert f"tljh-config set limits.memory {rule['memory_limit']}" in calls
    assert f"tljh-config set limits.cpu {rule['cpu_limit']}" in calls and calls[-1] == "tljh-config reload"
    installed = prefix / "config" / "jupyterhub_config.d" / "normlab.py"
    assert installed.read_bytes() == (DEPLOY / "tljh" / "normlab.py").read_bytes()
    assert not list((tmp_path / "admin home").iterdir())     # nothing lands in the admin's home


def test_tljh_install_script_builds_the_wheel_afresh_and_says_when_tljh_is_missing(tmp_path):
    """After `git pull` the wheel must carry the new lessons: a stale dist/normlab-*.whl is never reused (its
    version number is the same). Without TLJH's user environment the script says so before doing anything."""
    repo = private_repo_copy(tmp_path)
    prefix, log, env = stand_ins(tmp_path)
    stale = repo / "dist" / "normlab-0.1.0-py3-none-any.whl"
    stale.parent.mkdir()
    stale.write_text("old lessons", encoding="utf-8")
    python = prefix / "user" / "bin" / "python"        # pip wheel -> a new wheel in -w DIR; the rest: real python
    python.unlink()
    python.write_text(f'#!/bin/sh\nif [ "$1 $2 $3" = "-m pip wheel" ]; then\n  echo "python $*" >> "{log}"\n'
                      '  while [ $# -gt 0 ]; do [ "$1" = -w ] && out=$2; shift; done\n'
                      '  echo "new lessons" > "$out/normlab-0.1.0-py3-none-any.whl"; exit 0\nfi\n'
                      f'exec "{sys.executable}" "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    out = subprocess.run(["sh", str(repo / "deploy/tljh/install.sh"), "course"], env=env,
                         capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    calls = log.read_text(encoding="utf-8").splitlines()
    assert any(c.startswith("python -m pip wheel --no-deps") for c in calls), calls
    assert stale.read_text(encoding="utf-8") == "new lessons\n"
    assert f"pip install --no-deps --force-reinstall {stale}" in calls
    # no TLJH: a clear message, nothing run
    log.unlink()
    shutil.rmtree(prefix / "user")
    out = subprocess.run(["sh", str(repo / "deploy/tljh/install.sh"), "course"], env=env,
                         capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert out.returncode != 0 and "TLJH" in out.stderr and "第 2 步" in out.stderr and not log.exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("runuser") is None,
                    reason="needs root and runuser to ask whether another account can read the repository")
def test_tljh_install_script_refuses_a_repository_other_accounts_can_read():
    import tempfile

    with tempfile.TemporaryDirectory(prefix="normlab-open-repo-") as tmp:   # (pytest's own tmp is root's only)
        tmp = Path(tmp)
        repo = private_repo_copy(tmp)
        _, log, env = stand_ins(tmp)
        for p in (tmp, repo, repo / "notebooks"):
            p.chmod(0o755)
        out = subprocess.run(["sh", str(repo / "deploy/tljh/install.sh"), "course", "x.whl"], env=env,
                             capture_output=True, text=True, encoding="utf-8", timeout=60)
        assert out.returncode != 0 and "/root/normlab" in out.stderr and not log.exists()


def test_z2jh_values_start_the_server_as_tljh_does_with_the_sizing_files_numbers():
    yaml = pytest.importorskip("yaml")
    values = yaml.safe_load((DEPLOY / "z2jh" / "values.yaml").read_text(encoding="utf-8"))
    single = values["singleuser"]
    _, tljh = load_tljh_config(Path("/opt/conda/bin"))                 # the image's environment
    assert single["cmd"] == ["/bin/sh", "-c", tljh["SERVER_START"], "normlab-singleuser"]
    assert "lifecycleHooks" not in single                                # (a failing hook would kill the pod)
    assert single["defaultUrl"] == "/lab/tree/normlab-course/00_course_map.ipynb"
    assert single["extraEnv"]["OMP_NUM_THREADS"] == "1"
    rule = json.loads((DEPLOY / "sizing.json").read_text(encoding="utf-8"))["rule"]
    assert (single["memory"]["guarantee"], single["memory"]["limit"]) == (rule["memory_guarantee"], rule["memory_limit"])
    assert (single["cpu"]["guarantee"], single["cpu"]["limit"]) == (rule["cpu_guarantee"], rule["cpu_limit"])


def test_no_recipe_sends_a_learner_to_the_answers():
    """The course's repository holds every answer and teacher note (notebooks/*.md): no link or image of
    deploy/ opens it; learners get the wheel (learner copies only, tests/test_course_package.py)."""
    for path in (DEPLOY / "z2jh" / "values.yaml", DEPLOY / "z2jh" / "Dockerfile", DEPLOY / "tljh" / "normlab.py"):
        text = path.read_text(encoding="utf-8")                          # what learners' servers are made of
        assert "git-pull?" not in text and "notebooks/" not in text and "--solutions" not in text, path
    assert "nbgitpuller" not in (DEPLOY / "z2jh" / "Dockerfile").read_text(encoding="utf-8")


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


def test_the_guides_sizing_is_deploy_sizing_json():
    """book/instructor.md's class chapter is deploy/sizing.json: the measured table (K learners running lesson
    01 at once through the hub, `python3 tools/class_sizing.py sizing --learners 1 2 4`), the idle server's
    memory (`tools/class_sizing.py idle`), the rule's numbers and the machine sizes class_sizes() derives from them."""
    sys.path.insert(0, str(ROOT / "tools"))
    import class_sizing

    d = json.loads((DEPLOY / "sizing.json").read_text(encoding="utf-8"))
    guide = (ROOT / "book" / "instructor.md").read_text(encoding="utf-8")
    chapter = guide.split("### 一个班用一台服务器", 1)[1].split("\n## ", 1)[0]
    rows, rule = d["measured"]["rows"], d["rule"]
    assert sorted({r["K"] for r in rows}) == [1, 2, 4] and not any(r["error"] for r in rows)
    for k in (1, 2, 4):
        rs = [r for r in rows if r["K"] == k]
        secs, mem = [r["seconds"] for r in rs], [r["peak_mb"] for r in rs]
        row = f"| {k} | {min(secs):.1f}–{max(secs):.1f} | {min(mem):.0f}–{max(mem):.0f} |"
        assert row in chapter, row
    idle = d["measured"]["server_idle_mb"]
    assert f"空闲时占 {min(idle):.0f}–{max(idle):.0f} MB" in chapter
    # the guarantee holds what was measured: one idle server and one lesson kernel at its peak
    kernel = max(r["peak_mb"] for r in rows)
    assert max(idle) + kernel <= float(rule["memory_guarantee"].rstrip("M"))
    assert f"≈ {max(idle):.0f} + {kernel:.0f} MB" in chapter
    for text in (f"**{rule['memory_guarantee']}**", f"**{rule['memory_limit']}**",
                 f"**每核 {rule['learners_per_core']} 个同时计算的学员**", f"limits.memory={rule['memory_limit']}"):
        assert text in chapter, text
    modes = {"lockstep": "跟着老师同时运行", "self-paced": "自定进度"}
    for r in class_sizing.class_sizes(d):
        row = f"| {r['learners']} | {modes[r['mode']]} | {r['cores']} | {r['memory_gb']} |"
        assert row in chapter, row
        if r["mode"] == "self-paced":         # Kubernetes schedules the class on the self-paced machine
            assert r["learners"] * rule["cpu_guarantee"] <= r["cores"] - rule["system_cores"], r


# Modules the wheel declares that the hub image leaves out (Dockerfile.hub installs with --no-deps).
HEAVY = ("torch", "numpy", "matplotlib", "anywidget", "ipywidgets", "jupyterlab", "sklearn", "mplfonts", "tqdm")
BLOCK_HEAVY = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HEAVY!r}:
            raise ModuleNotFoundError(f"not in the hub image: {{name}}")
sys.meta_path.insert(0, Block())
"""


def test_z2jh_hub_image_holds_the_service_without_the_lesson_stack():
    """Dockerfile.hub installs the course's wheel into the chart's hub image with --no-deps (the wheel
    declares torch and the lesson stack, GBs the hub never uses): so the service, its store and the hub
    configuration values.yaml runs must import with none of them. Run here with those imports blocked."""
    yaml = pytest.importorskip("yaml")
    text = (DEPLOY / "z2jh" / "Dockerfile.hub").read_text(encoding="utf-8")
    assert re.search(r"^FROM quay\.io/jupyterhub/k8s-hub:\$\{CHART_VERSION\}$", text, re.M)
    pip_lines = [line for line in text.splitlines() if "pip install" in line]
    assert pip_lines and all("--no-deps" in line and "normlab-*.whl" in line for line in pip_lines)
    assert text.index("USER root") < text.index("pip install") < text.rindex("USER ${NB_USER}")
    values = yaml.safe_load((DEPLOY / "z2jh" / "values.yaml").read_text(encoding="utf-8"))
    assert values["hub"]["image"]["name"].endswith("/normlab-hub")
    config = values["hub"]["extraConfig"]["normlab-classroom"]
    args = re.search(r"\[sys\.executable, \"-m\", \"normlab\.classroom\.hubconfig\",(.*?)\]", config, re.S).group(1)
    argv = [sys.executable if a == "sys.executable" else a.strip('"')
            for a in re.findall(r'"[^"]*"|sys\.executable', args)]
    probe = BLOCK_HEAVY + f"""
import runpy, sys
import normlab.classroom.service, normlab.classroom.store
sys.argv = ["hubconfig"] + {argv!r}
try:
    runpy.run_module("normlab.classroom.hubconfig", run_name="__main__")
except SystemExit as e:
    assert not e.code, e.code
print("HEAVY:", sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r}))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, encoding="utf-8",
                         timeout=60, cwd=ROOT, env={**os.environ, "PYTHONUTF8": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "c.JupyterHub.services.append" in out.stdout and "HEAVY: []" in out.stdout
