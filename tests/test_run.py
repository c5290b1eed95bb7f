"""run.py, the learner's only entry point: `course` serves notebook 00 from the workspace, `--reset`
keeps the learner's answers, the torch build is chosen for the machine, pip's configuration is kept."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import free_port

ROOT = Path(__file__).resolve().parent.parent


def load_run():
    spec = importlib.util.spec_from_file_location("normlab_run_py", ROOT / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def runpy():
    return load_run()


def files_under(folder: Path) -> list[tuple[str, int]] | None:
    if not folder.exists():
        return None
    return sorted((str(p.relative_to(folder)), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file())


@pytest.fixture(autouse=True)
def checkout_workspace_untouched(tmp_path, monkeypatch):
    """The checkout's workspace/ holds a learner's answers: every test here points run.py at a
    temporary one (NORMLAB_WORKSPACE), and fails if the real one changed all the same."""
    monkeypatch.setenv("NORMLAB_WORKSPACE", str(tmp_path / "learner-workspace"))
    before = files_under(ROOT / "workspace")
    yield
    assert files_under(ROOT / "workspace") == before, "a test wrote into the checkout's workspace/"


def test_workspace_folder_follows_normlab_workspace(runpy, tmp_path, monkeypatch):
    assert runpy.workspace_dir() == tmp_path / "learner-workspace"
    monkeypatch.delenv("NORMLAB_WORKSPACE")
    assert runpy.workspace_dir() == ROOT / "workspace"        # a learner's default (only named, never written)


def test_course_command_serves_the_first_notebook_from_workspace(tmp_path):
    workspace = tmp_path / "ws"   # never the checkout's own workspace/, where a learner's answers live
    port, token = free_port(), secrets.token_hex(8)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), "course", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(plain_shell_env(), PYTHONUNBUFFERED="1", NORMLAB_WORKSPACE=str(workspace)), encoding="utf-8")
    try:
        url = f"http://127.0.0.1:{port}/api/contents/00_course_map.ipynb?token={token}"  # root: the workspace
        deadline = time.monotonic() + 240   # a new venv's first JupyterLab start is slow on a busy machine
        while True:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(url, timeout=2) as resp:
                    model = json.load(resp)
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("run.py course did not serve the notebook:\n" + proc.communicate()[0][-3000:])
            time.sleep(0.5)
        assert model["type"] == "notebook" and model["content"]["cells"]
        sources = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.md"))
        assert sources and all((workspace / f"{s}.ipynb").exists() for s in sources)

        def get(path, query=""):
            url = f"http://127.0.0.1:{port}/api/contents/{urllib.parse.quote(path)}?{query}token={token}"
            with urllib.request.urlopen(url, timeout=30) as r:
                return json.load(r)
        # what the file browser shows first: one notebook per lesson, none with a filled-in answer
        first = {e["name"]: get(e["path"])["content"] for e in get("")["content"] if e["type"] == "notebook"}
        assert sorted(first) == [f"{s}.ipynb" for s in sources] and answers_shown(first) == {}
        # the files the lessons tell a learner to read open there, read-only
        norms = get("normlab-source/normlab/norms.py", "type=file&")   # (jupytext would serve it as a notebook too)
        assert norms["type"] == "file" and "class BatchNorm" in norms["content"]
        if hasattr(os, "geteuid") and os.geteuid() != 0:          # root writes anything
            assert norms["writable"] is False
        assert get("normlab-source/glossary.md", "type=file&")["content"].count("|") > 50
        # a Terminal opened in this JupyterLab runs the course's Python: the drill command works there
        said = in_a_terminal(port, token, "python -m normlab.drills --help; echo exit=$?")
        assert "exit=0" in said and "python -m normlab.drills --progress" in said and "layernorm" in said, said[-2000:]
    finally:
        proc.terminate()
        out = proc.communicate(timeout=20)[0]
    assert f"{workspace}/00_course_map.ipynb" in out  # it told the learner where they are
    # the URL JupyterLab prints (and opens) is lesson 00, not the Launcher
    assert f"127.0.0.1:{port}/lab/tree/00_course_map.ipynb?token=" in out, out[-2000:]


def plain_shell_env() -> dict[str, str]:
    """The environment of a shell where no venv is activated: the venv's bin/ off PATH, no VIRTUAL_ENV."""
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


@pytest.mark.skipif(os.name == "nt", reason="a POSIX shell line")
def test_the_printed_drill_command_works_from_a_plain_shell_in_another_folder(tmp_path, monkeypatch, capsys):
    """README, 08 and the instructor guide print `python3 run.py drills ...` (issue 36 item 6): typed in a
    plain shell, no venv activated, it checks the learner's file in the shell's folder (one command: each
    costs a torch import); the checker prints the command that started it (NORMLAB_DRILLS_PROG, which
    run.py sets to that command) as the one to run next."""
    import importlib

    (tmp_path / "my_ln.py").write_text((ROOT / "tests" / "drill_corpus" / "ln_textbook_two_pass.py")
                                       .read_text(encoding="utf-8"), encoding="utf-8")
    env = dict(plain_shell_env(), NORMLAB_DRILLS_FILE=str(tmp_path / "progress.json"))
    prog = load_run().drills_prog(cwd=tmp_path)   # what the checker prints: run.py's path, quoted where it has a space
    assert str(ROOT / "run.py") in prog
    check = subprocess.run(f"{prog} layernorm my_ln.py", shell=True, cwd=tmp_path, env=env, capture_output=True,
                           text=True, encoding="utf-8", timeout=300)
    assert check.returncode == 0 and "面试级 ✓" in check.stdout, check.stdout + check.stderr
    assert json.loads((tmp_path / "progress.json").read_text(encoding="utf-8"))["kinds"]["layernorm"]["attempts"] == 1
    import normlab.drills.__main__ as cli
    monkeypatch.setenv("NORMLAB_DRILLS_PROG", prog)
    monkeypatch.setenv("NORMLAB_DRILLS_FILE", str(tmp_path / "progress.json"))
    monkeypatch.chdir(tmp_path)
    try:
        assert importlib.reload(cli).main(["start", "layernorm"]) == 0
    finally:
        monkeypatch.delenv("NORMLAB_DRILLS_PROG")
        importlib.reload(cli)
    assert f"{prog} check layernorm my_layernorm.py" in capsys.readouterr().out


def test_drill_command_names_run_py_as_typed(runpy, tmp_path):
    assert runpy.drills_prog(ROOT) == ("py" if os.name == "nt" else "python3") + " run.py drills"
    elsewhere = runpy.drills_prog(tmp_path)
    assert elsewhere.endswith(" drills") and str(ROOT / "run.py") in elsewhere


def test_help_points_teachers_to_the_guide_the_teachers_book_and_deploy(runpy, capsys):
    assert runpy.main([]) == 2
    out = capsys.readouterr().out
    assert "book/instructor.md" in out and "run.py book --teacher" in out and "deploy/" in out and "run.py drills" in out
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "book/instructor.md" in readme and "run.py book --teacher" in readme and "deploy/README.md" in readme
    for doc in ("README.md", "notebooks/08_drills.md", "book/instructor.md"):   # the command that works, first
        text = (ROOT / doc).read_text(encoding="utf-8")
        assert "python3 run.py drills" in text
        for i in find_all(text, "python -m normlab.drills"):   # the module form only where that Python is on PATH:
            before = text[max(0, i - 120): i]                   # the course's JupyterLab or a server's terminal
            assert any(w in before for w in ("JupyterLab", "终端", "bin/")), (doc, text[i - 120: i + 40])


def find_all(text: str, what: str) -> list[int]:
    out, i = [], text.find(what)
    while i >= 0:
        out.append(i)
        i = text.find(what, i + 1)
    return out


def in_a_terminal(port: int, token: str, command: str, timeout: float = 90) -> str:
    """What a Terminal of the JupyterLab on `port` shows after `command` (through jupyter_server's
    REST API, POST /api/terminals, and the terminal's websocket, as JupyterLab's Terminal uses them)."""
    from tornado.websocket import websocket_connect

    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/terminals", data=b"", method="POST",
                                 headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        name = json.load(r)["name"]

    async def talk() -> str:
        ws = await websocket_connect(f"ws://127.0.0.1:{port}/terminals/websocket/{name}?token={token}")
        ws.write_message(json.dumps(["stdin", command + "; echo done-$((6*7))\r"]))
        seen, deadline = "", time.monotonic() + timeout
        while "done-42" not in seen and time.monotonic() < deadline:
            msg = await ws.read_message()
            if msg is None:
                break
            kind, *rest = json.loads(msg)
            seen += rest[0] if kind == "stdout" else ""
        ws.close()
        return seen
    try:   # a loop of its own in a thread of its own: this worker's thread may hold Playwright's running loop
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, asyncio.wait_for(talk(), timeout + 10)).result()
    finally:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/terminals/{name}", method="DELETE",
                                     headers={"Authorization": f"token {token}"})
        with contextlib.suppress(OSError):
            urllib.request.urlopen(req, timeout=10).close()


# --- the workspace: learner copies at the door, course --reset ---------------------------------

def edited(path: Path, text: str) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": text})
    path.write_text(json.dumps(nb), encoding="utf-8")


def answer_lines(source: Path) -> tuple[set[str], set[str]]:
    """A lesson source's lines read from its MyST text (not through normlab.course): (those of its
    answers, long enough to be telling, not `return y`; all the others). Answers: code between
    "### BEGIN SOLUTION" and "### END SOLUTION", text between "<!-- BEGIN SOLUTION -->" and
    "<!-- END SOLUTION -->", and every cell tagged solution (`:tags: [solution]`, `+++ {"tags": ["solution"]}`)."""
    inside_lines, outside = set(), set()
    block = tagged = False
    lines = source.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("```{code-cell}") or s.startswith("+++"):      # a new cell starts
            tagged = '"solution"' in s or (i + 1 < len(lines) and lines[i + 1].strip() == ":tags: [solution]")
        if s in ("### BEGIN SOLUTION", "<!-- BEGIN SOLUTION -->"):
            block = True
        elif s in ("### END SOLUTION", "<!-- END SOLUTION -->"):
            block = False
        elif (block or tagged) and len(s) >= 24 and not s.startswith("#"):
            inside_lines.add(s)
        elif not (block or tagged):
            outside.add(s)
    return inside_lines, outside


def code_of(nb: dict) -> str:
    return "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                     for c in nb["cells"] if c["cell_type"] == "code")


def text_of(nb: dict) -> str:
    return "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"])


def answers_shown(notebooks: dict[str, dict]) -> dict[str, list[str]]:
    """notebook name -> the answer lines (of any lesson) its cells contain."""
    split = [answer_lines(src) for src in (ROOT / "notebooks").glob("[0-9][0-9]_*.md")]
    answers = set().union(*(a for a, _ in split)) - set().union(*(o for _, o in split))   # only in answers
    assert len(answers) >= 20, "the sources should hold reference answers"
    found = {name: sorted(a for a in answers if a in text_of(nb)) for name, nb in notebooks.items()}
    return {name: lines for name, lines in found.items() if lines}


@pytest.fixture(scope="module")
def fresh_workspace(tmp_path_factory):
    """A workspace as `run.py course` makes it (the same command, normlab.course init --solutions)."""
    ws = tmp_path_factory.mktemp("ws0") / "workspace"
    assert load_run().course_command(Path(sys.executable), "init", ws, "--solutions") == 0
    return ws


def test_the_notebooks_a_learner_sees_first_hold_no_answer(fresh_workspace):
    first = {p.name: json.loads(text(p)) for p in fresh_workspace.glob("*.ipynb")}
    sources = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.md"))
    assert sorted(first) == [f"{s}.ipynb" for s in sources]       # one door per lesson, plain names
    assert answers_shown(first) == {}
    # the detector sees answers where they are: every solution copy shows its own, under a banner
    solutions = {p.name: json.loads(text(p)) for p in (fresh_workspace / "solutions").glob("*.ipynb")}
    assert len(solutions) >= 8 and set(answers_shown(solutions)) == set(solutions)
    for name, nb in solutions.items():
        assert "**答案版 (solution version)**" in "".join(nb["cells"][1]["source"]), name
        assert "**答案版 (solution version)**" not in json.dumps(first[name], ensure_ascii=False)
        assert "raise NotImplementedError" in code_of(first[name]), name     # the learner's blanks


@pytest.fixture
def workspace(fresh_workspace, tmp_path):
    import shutil

    ws = tmp_path / "workspace"
    shutil.copytree(fresh_workspace, ws)
    edited(ws / "03_layernorm.ipynb", "MY NOTES 03")
    edited(ws / "05_deepnorm.ipynb", "MY NOTES 05")
    edited(ws / "08_drills.ipynb", "MY DRILL ANSWER")
    (ws / "my_own_file.py").write_text("x = 1\n", encoding="utf-8")
    return ws


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_course_again_never_overwrites_a_learners_work(runpy, workspace):
    (workspace / "07_beyond.ipynb").unlink()                      # a lesson the learner deleted comes back
    assert runpy.course_command(Path(sys.executable), "init", workspace, "--solutions") == 0
    assert "MY NOTES 03" in text(workspace / "03_layernorm.ipynb")
    assert "MY DRILL ANSWER" in text(workspace / "08_drills.ipynb")
    assert (workspace / "07_beyond.ipynb").exists() and not (workspace / ".backup").exists()


def test_reset_one_notebook_keeps_the_others_and_backs_up_the_old_copy(runpy, workspace):
    runpy.reset_workspace(Path(sys.executable), workspace, "03", everything=False)
    assert "MY NOTES 03" not in text(workspace / "03_layernorm.ipynb")
    backups = list((workspace / ".backup").glob("03_layernorm.*.ipynb"))
    assert len(backups) == 1 and "MY NOTES 03" in text(backups[0])
    assert "MY NOTES 05" in text(workspace / "05_deepnorm.ipynb")
    assert "MY DRILL ANSWER" in text(workspace / "08_drills.ipynb")
    assert (workspace / "my_own_file.py").exists()


def test_reset_by_the_old_learner_name_resets_the_drill_notebook_into_the_backup(runpy, workspace):
    runpy.reset_workspace(Path(sys.executable), workspace, "08_drills_learner", everything=False)
    assert "MY DRILL ANSWER" not in text(workspace / "08_drills.ipynb")
    assert any("MY DRILL ANSWER" in text(b) for b in (workspace / ".backup").glob("08_drills.*.ipynb"))
    assert "MY NOTES 03" in text(workspace / "03_layernorm.ipynb")


def test_reset_all_resets_every_notebook_but_deletes_nothing(runpy, workspace):
    runpy.reset_workspace(Path(sys.executable), workspace, None, everything=True)
    for nb in workspace.glob("*.ipynb"):
        assert "MY " not in text(nb), nb.name
    backed_up = "".join(text(b) for b in (workspace / ".backup").glob("*.ipynb"))
    assert all(s in backed_up for s in ("MY NOTES 03", "MY NOTES 05", "MY DRILL ANSWER"))
    assert (workspace / "my_own_file.py").exists()


@pytest.mark.parametrize("name", ["", "99_nothing"])
def test_reset_without_a_valid_name_changes_nothing(runpy, workspace, name, capfd):
    before = {p.name: text(p) for p in workspace.glob("*.ipynb")}
    with pytest.raises(SystemExit) as exc:
        runpy.reset_workspace(Path(sys.executable), workspace, name, everything=False)
    assert exc.value.code == 2
    assert {p.name: text(p) for p in workspace.glob("*.ipynb")} == before
    assert "--reset 03" in capfd.readouterr().err


def test_a_workspace_of_the_old_layout_keeps_its_answers_and_loses_its_answer_key(runpy, fresh_workspace, tmp_path):
    """Before: NAME.ipynb was the solution version and NAME_learner.ipynb the learner's. After the
    next `course`, the learner's file is the plain name and the solution copy is in .backup/."""
    import shutil

    ws = tmp_path / "old"
    ws.mkdir()
    shutil.copyfile(fresh_workspace / "solutions" / "03_layernorm.ipynb", ws / "03_layernorm.ipynb")
    shutil.copyfile(fresh_workspace / "03_layernorm.ipynb", ws / "03_layernorm_learner.ipynb")
    edited(ws / "03_layernorm_learner.ipynb", "MY ANSWER 03")
    assert runpy.course_command(Path(sys.executable), "init", ws) == 0
    assert "MY ANSWER 03" in text(ws / "03_layernorm.ipynb") and not list(ws.glob("*_learner.ipynb"))
    assert answers_shown({p.name: json.loads(text(p)) for p in ws.glob("*.ipynb")}) == {}
    assert "答案版" in text(next((ws / ".backup").glob("03_layernorm.*.ipynb")))


def test_reset_options_are_taken_out_of_jupyterlabs_arguments(runpy):
    assert runpy.take_option(["--reset", "03", "--no-browser"], "--reset", True) == ("03", ["--no-browser"])
    assert runpy.take_option(["--reset=08_drills_learner"], "--reset", True) == ("08_drills_learner", [])
    assert runpy.take_option(["--reset", "--port=1"], "--reset", True) == ("", ["--port=1"])
    assert runpy.take_option(["--reset-all", "--port=1"], "--reset", True) == (None, ["--reset-all", "--port=1"])
    assert runpy.take_option(["--reset-all"], "--reset-all", False) == ("--reset-all", [])


# --- which torch ------------------------------------------------------------------------------

@pytest.mark.parametrize("system, nvidia, override, want", [
    ("linux", False, "auto", "cpu"),          # the common learner's laptop: no CUDA libraries
    ("linux", True, "auto", "default"),       # an NVIDIA GPU: the CUDA build can use it
    ("darwin", False, "auto", "default"),     # macOS wheels are CPU + MPS already
    ("win32", False, "auto", "default"),      # Windows' default wheel is the CPU build
    ("linux", False, "default", "default"),   # the flag overrides ...
    ("linux", True, "cpu", "cpu"),
    ("darwin", False, "cpu", "cpu"),
])
def test_torch_choice(runpy, system, nvidia, override, want):
    choice, why = runpy.torch_choice(override, system=system, nvidia=nvidia)
    assert choice == want and why


def test_cpu_index_reachable_adds_it_as_an_extra_index(runpy):
    asked = []
    args, line = runpy.torch_pip_args("cpu", probe=lambda url: asked.append(url) or True)
    assert asked == [runpy.CPU_INDEX]
    assert args == ["--extra-index-url", runpy.CPU_INDEX]
    assert "--index-url" not in args        # never replaces the learner's index (a mirror)
    assert "CPU" in line


def test_cpu_index_unreachable_falls_back_to_the_default_wheel_with_one_line(runpy):
    args, line = runpy.torch_pip_args("cpu", probe=lambda url: False)
    assert args == []
    assert "\n" not in line and runpy.CPU_INDEX in line and "默认" in line


def test_default_choice_does_not_probe(runpy):
    args, _ = runpy.torch_pip_args("default", probe=lambda url: pytest.fail("probed"))
    assert args == []


class FakeResponse:
    status = 200

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("error", [urllib.error.URLError("no route"), TimeoutError("timed out"),
                                   ConnectionRefusedError(), urllib.error.HTTPError("u", 403, "no", {}, None)])
def test_index_probe_is_false_when_the_index_cannot_be_reached(runpy, error):
    def opener(url, timeout):
        raise error
    assert runpy.index_reachable(runpy.CPU_INDEX, opener=opener) is False


def test_index_probe_is_true_when_the_index_answers(runpy):
    seen = []
    assert runpy.index_reachable(runpy.CPU_INDEX, timeout=3, opener=lambda url, timeout: seen.append(url)
                                 or FakeResponse()) is True
    assert seen == [runpy.CPU_INDEX + "/torch/"]


@pytest.fixture
def fake_install(runpy, tmp_path, monkeypatch):
    """ensure_env with pip replaced by a recorder (and an existing interpreter as the venv's python)."""
    calls = []
    monkeypatch.setattr(runpy, "VENV", tmp_path / "venv")
    monkeypatch.setattr(runpy, "STAMP", tmp_path / "stamp")
    monkeypatch.setattr(runpy, "venv_bin", lambda name: Path(sys.executable))
    monkeypatch.setattr(runpy, "configure_jupyter", lambda: None)
    # the build pip would install: the CPU index gives +cpu, Linux's default wheel is a CUDA build
    monkeypatch.setattr(runpy, "torch_build", lambda py: "2.13.0+cpu (CPU)" if any(
        "--extra-index-url" in c for c in calls) else "2.13.0 (CUDA 13.0)")
    monkeypatch.setattr(runpy, "run", lambda cmd, **kw: calls.append([str(c) for c in cmd]) or 0)
    monkeypatch.setattr(runpy, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(runpy.sys, "platform", "linux")
    monkeypatch.delenv("NORMLAB_TORCH", raising=False)
    return calls


@pytest.mark.parametrize("reachable", [True, False])
def test_install_prefers_the_cpu_index_and_keeps_pip_configuration(runpy, fake_install, monkeypatch, reachable,
                                                                   capsys):
    monkeypatch.setattr(runpy, "index_reachable", lambda url, **kw: reachable)
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")   # a learner's mirror
    runpy.ensure_env(("test",))
    torch_step, rest = fake_install[0], fake_install[1:]
    assert runpy.torch_requirement() in torch_step and "-e" not in torch_step   # torch alone, first
    assert runpy.torch_requirement().startswith("torch==")   # run.py installs the exact tested torch
    assert ("--extra-index-url" in torch_step) == reachable
    for cmd in fake_install:   # the mirror stays: no --index-url, no pip config written, no isolated mode
        assert "--index-url" not in cmd and "-i" not in cmd and "config" not in cmd and "--isolated" not in cmd
        assert all(runpy.CPU_INDEX not in c for c in cmd) or cmd is torch_step
    assert os.environ["PIP_INDEX_URL"] == "https://mirror.example/simple"
    step2 = next(cmd for cmd in rest if "-e" in cmd)
    if runpy.LOCK.name == "requirements-tested.txt":   # 3.11's lock was made with the CPU build
        assert step2[step2.index("-c") + 1].endswith("constraints-requirements-tested.txt") != reachable
    out = capsys.readouterr().out
    assert ("改用默认的 torch 轮子" in out) != reachable
    assert runpy.read_stamp() == ({"test"}, "cpu" if reachable else "default")   # what was installed


def test_torch_flag_switches_an_installed_build(runpy, fake_install, monkeypatch):
    monkeypatch.setattr(runpy, "index_reachable", lambda url, **kw: False)
    runpy.ensure_env(("test",))                       # index unreachable: the default (CUDA) build went in
    assert runpy.read_stamp()[1] == "default"
    fake_install.clear()
    runpy.ensure_env(("test",))                       # up to date: nothing to do
    assert fake_install == []
    monkeypatch.setattr(runpy, "index_reachable", lambda url, **kw: True)
    runpy.ensure_env(("test",), torch_override="cpu")  # the flag: swap it for the CPU build
    assert fake_install[0][3:] == ["uninstall", "-y", "-q", "torch"]
    assert "--extra-index-url" in fake_install[1]
    assert runpy.read_stamp()[1] == "cpu"
    fake_install.clear()
    runpy.ensure_env(("test",), torch_override="cpu")  # asked again: already the CPU build
    assert fake_install == []


@pytest.mark.parametrize("made_with, build, dropped", [
    ("CPU", "2.13.0 (CUDA 13.0)", True),              # 3.11's lock (CPU) beside a learner's CUDA build
    ("CPU", "2.13.0+cpu (CPU)", False),
    ("torch 2.13.0+cu130 (CUDA 13.0)", "2.13.0 (CUDA 13.0)", False),
    ("torch 2.13.0+cu130 (CUDA 13.0)", "2.13.0+cpu (CPU)", True),
])
def test_constraints_leave_torchs_own_pins_to_the_installed_build(runpy, tmp_path, monkeypatch, made_with, build,
                                                                   dropped):
    monkeypatch.setattr(runpy, "VENV", tmp_path)
    lock = tmp_path / "requirements-tested.txt"
    lock.write_text(f"# Exact versions ... (Python 3.11, Linux x86-64, {made_with}).\n# ...\n"
                    "numpy==2.4.6\nnvidia-cublas==13.1.1.3\ncuda-toolkit==13.0.3.0\ntorch==2.13.0\ntriton==3.9.0\n", encoding="utf-8")
    text = runpy.constraints_for(lock, build).read_text(encoding="utf-8")
    assert "numpy==2.4.6" in text and "torch==2.13.0" in text
    assert ("triton" not in text and "nvidia" not in text and "cuda-" not in text) == dropped


def test_each_python_has_its_own_constraints_file(runpy):
    assert runpy.lock_file((3, 11)).name == "requirements-tested.txt"
    assert runpy.lock_file((3, 13)).name == "requirements-tested-py3.13.txt"
    for minor in (11, 12, 13):
        assert runpy.lock_file((3, minor)).exists(), f"no constraints tested on Python 3.{minor}"


def test_python_option_builds_a_separate_venv(runpy, monkeypatch):
    monkeypatch.setenv("NORMLAB_VENV", "")
    minor = runpy.use_python(sys.executable)
    assert minor == sys.version_info[:2]
    assert runpy.VENV == ROOT / "build" / "venvs" / f"py{minor[0]}.{minor[1]}"
    assert os.environ["NORMLAB_VENV"] == str(runpy.VENV)   # commands the tests start use the same venv
    assert runpy.find_python("2.1") is None


# --- 00's environment check catches a wrong install -----------------------------------------------

def fake_torch(cuda=None, hip=None, mps_built=False, mps_ok=False, gpu=None):
    from types import SimpleNamespace as NS
    return NS(version=NS(cuda=cuda, hip=hip),
              backends=NS(mps=NS(is_built=lambda: mps_built, is_available=lambda: mps_ok)),
              cuda=NS(is_available=lambda: gpu is not None, get_device_name=lambda i: gpu))


@pytest.mark.parametrize("t, build, gpu", [
    (fake_torch(), "CPU", None),
    (fake_torch(cuda="13.0"), "CUDA 13.0", None),
    (fake_torch(cuda="13.0", gpu="NVIDIA H100"), "CUDA 13.0", "NVIDIA H100"),
    (fake_torch(mps_built=True, mps_ok=True), "CPU + MPS", "Apple MPS"),
    (fake_torch(hip="6.4"), "ROCm 6.4", None),
])
def test_env_check_names_the_torch_build_and_the_gpu(t, build, gpu):
    from normlab import env
    assert env.torch_build(t) == build and env.usable_gpu(t) == gpu


def test_env_check_warns_on_a_cuda_build_without_a_gpu():
    from normlab.env import unexpected
    ok = dict(python=(3, 12), torch_version="2.13.0", pin="2.13.0")
    assert unexpected(build="CUDA 13.0", gpu="NVIDIA H100", driver=True, system="linux", **ok) == []
    assert unexpected(build="CPU", gpu=None, driver=False, system="linux", **dict(ok, torch_version="2.13.0+cpu")) == []
    assert unexpected(build="CPU + MPS", gpu="Apple MPS", driver=False, system="darwin", **ok) == []
    wasted = unexpected(build="CUDA 13.0", gpu=None, driver=False, system="linux", **ok)
    assert len(wasted) == 1 and "GB" in wasted[0] and "--torch cpu" in wasted[0]
    assert len(unexpected(build="CUDA 13.0", gpu=None, driver=True, system="linux", **ok)) == 2  # driver too old?
    assert "--torch default" in unexpected(build="CPU", gpu=None, driver=True, system="linux", **ok)[0]
    assert "3.10" in unexpected(build="CPU", gpu=None, driver=False, system="linux", **dict(ok, python=(3, 10)))[0]
    assert "2.12.0" in unexpected(build="CPU", gpu=None, driver=False, system="linux",
                                  **dict(ok, torch_version="2.12.0+cpu"))[0]


def test_env_check_knows_the_tested_torch_range():
    from normlab.env import torch_in, unexpected
    for version, inside in [("2.4.0", False), ("2.6.0+cu124", False), ("2.7.1", True), ("2.13.0+cpu", True),
                            ("2.14.1", True), ("2.15.0", False), ("2.15.0.dev20261101+cu130", False)]:
        assert torch_in(version, "<2.15,>=2.7.1") == inside, version
        warned = unexpected((3, 11), "CPU", None, False, "linux", version, "<2.15,>=2.7.1")
        assert bool(warned) != inside and all(version in w for w in warned)


def test_torch_step_installs_the_exact_tested_torch_and_without_a_lock_the_declared_range(runpy, tmp_path):
    lock = tmp_path / "requirements-tested.txt"
    lock.write_text("# header\nnumpy==2.4.6\ntorch==2.13.0\ntriton==3.9.0\n", encoding="utf-8")
    assert runpy.torch_requirement(lock) == "torch==2.13.0"
    assert runpy.torch_requirement(tmp_path / "missing.txt") == "torch>=2.7.1,<2.15"
    assert runpy.torch_requirement() == f"torch=={runpy.LOCK.read_text(encoding='utf-8').split('torch==')[1].split()[0]}"


def test_env_check_on_this_machine_matches_the_install():
    import torch
    from normlab import env
    check = env.check()
    assert sorted(check.pin.split(",")) == ["<2.15", ">=2.7.1"] and check.torch_as_pinned   # normlab's metadata
    assert check.build.startswith("CUDA") == bool(torch.version.cuda)
    table = str(env.report())
    assert check.build in table and ("warning" in table) == bool(check.warnings)


def test_an_install_removes_the_slow_iri_checker_and_a_current_venv_too(runpy, fake_install):
    """jsonschema's optional rfc3987-syntax builds its parsers on import (0.9 s in each process that imports
    jsonschema): every install step removes it, and so does a run over a venv that is already current."""
    site = runpy.VENV / "lib" / "python3.11" / "site-packages"
    (site / "rfc3987_syntax").mkdir(parents=True)
    runpy.ensure_env(runpy.COURSE_EXTRAS)
    uninstall = [c for c in fake_install if "uninstall" in c]
    assert uninstall and uninstall[-1][-1] == "rfc3987-syntax" and fake_install[-1] == uninstall[-1]
    fake_install.clear()
    runpy.ensure_env(runpy.COURSE_EXTRAS)                    # current: nothing installed, the checker still goes
    assert [c for c in fake_install if "install" in c and "uninstall" not in c] == []
    assert [c[-1] for c in fake_install if "uninstall" in c] == ["rfc3987-syntax"]
    (site / "rfc3987_syntax").rmdir()
    fake_install.clear()
    runpy.ensure_env(runpy.COURSE_EXTRAS)
    assert fake_install == []                               # nothing to remove: no pip at all


def test_jsonschema_imports_without_building_iri_parsers():
    """This venv as run.py left it: importing jsonschema (as JupyterLab and nbformat do) loads no
    rfc3987_syntax (its parsers cost 0.9 s of CPU per process)."""
    out = subprocess.run([sys.executable, "-c", "import sys, jsonschema; print('rfc3987_syntax' in sys.modules)"],
                         capture_output=True, text=True, encoding="utf-8", check=True)
    assert out.stdout.strip() == "False", "rfc3987-syntax is installed: run.py's drop_slow_imports did not run"


def test_the_test_command_writes_bytecode_caches_even_where_they_are_switched_off(runpy, monkeypatch):
    """cmd_test hands pytest an environment without PYTHONDONTWRITEBYTECODE (issue 27: with it, each
    kernel and command line of the run compiled normlab again); the run's other settings stay."""
    calls = []
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setattr(runpy, "ensure_env", lambda extras: Path(sys.executable))
    monkeypatch.setattr(runpy, "ensure_browser", lambda: None)
    monkeypatch.setattr(runpy, "export_notebooks", lambda *a, **k: None)
    monkeypatch.setattr(runpy, "run", lambda cmd, **kw: calls.append((cmd, kw)) or 0)
    monkeypatch.setattr(runpy, "torch_build", lambda py: "test")
    assert runpy.cmd_test([]) == 0
    (cmd, kw), = calls
    assert "pytest" in cmd and "PYTHONDONTWRITEBYTECODE" not in kw["env"]
    assert kw["env"]["OMP_NUM_THREADS"] == "1" and kw["env"]["NORMLAB_DRILLS_FILE"] == "off"
    assert os.environ["PYTHONDONTWRITEBYTECODE"] == "1"        # the caller's own environment is left as it was


def test_utf8_mode_only_where_the_paths_are_utf8(runpy, tmp_path):
    """Issue 36 item 8: UTF-8 mode for run.py's children on Windows and for ASCII or UTF-8 folder names;
    not for a POSIX folder named in GB18030 bytes (UTF-8 mode would turn them into surrogates)."""
    gb18030 = Path(os.fsdecode(b"/tmp/" + "张三 的文件".encode("gb18030")))
    assert runpy.utf8_mode_helps((ROOT, tmp_path / "学习 课程"), windows=False)
    assert not runpy.utf8_mode_helps((ROOT, gb18030), windows=False)
    assert runpy.utf8_mode_helps((ROOT, gb18030), windows=True)


def test_a_failed_venv_says_what_venv_said(runpy, tmp_path):
    """Not "install python3-venv" when venv exists: the failure of a Python that cannot make this venv is
    quoted; python3-venv is named only when venv or ensurepip is what is missing."""
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    said = runpy.create_venv(sys.executable, blocker / "venv", "--without-pip")   # a file where a folder must go
    assert said and "python3-venv" not in said and "venv failed" in said
    fake = tmp_path / "python-without-venv"
    fake.write_text(f"#!/bin/sh\necho 'No module named venv' >&2\nexit 1\n", encoding="utf-8")
    fake.chmod(0o755)
    if os.name != "nt":
        assert "python3-venv" in runpy.create_venv(str(fake), tmp_path / "v")
