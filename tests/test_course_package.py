"""The course as a package (issue 29): a built wheel carries the lessons and the `normlab-course`
command; `normlab.course init` writes a learner's workspace from a read-only install without writing
anywhere else; every exported notebook starts with the same setup cell, which installs the course on a
host that lacks it and does nothing where it is installed.

Learners' copies only (issue 36): the wheel carries no solution block, tagged answer cell or teacher
note, gives the same learner copies as the full sources, and refuses `init --solutions`. Private by
default (issue 38): whatever the umask and the home's mode, the workspace, ~/.normlab and its JSON
files are their owner's only after init, reset, a drill check and a prediction."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from normlab.course.answer_key import learner_source

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md"))
BUILD_INPUTS = ["pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "normlab", "notebooks", "book/glossary.md"]


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`pip wheel .` of a copy of the checkout (the build writes build/ and *.egg-info beside its input)."""
    src = tmp_path_factory.mktemp("src")
    for name in BUILD_INPUTS:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(src)], capture_output=True, text=True, encoding="utf-8")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (whl,) = out.glob("normlab-*.whl")
    whl.with_suffix(".src").write_text(str(src), encoding="utf-8")   # what it was built from
    return whl


def test_the_wheel_carries_the_lessons_the_glossary_and_the_command(wheel):
    built_from = Path(wheel.with_suffix(".src").read_text(encoding="utf-8"))   # a copy of the checkout
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert {n for n in names if n.startswith("normlab/_course/notebooks/")} == \
            {f"normlab/_course/notebooks/{src.name}" for src in SOURCES}
        for src in SOURCES:                                         # the lessons, answers taken out
            full = (built_from / "notebooks" / src.name).read_text(encoding="utf-8")
            assert z.read(f"normlab/_course/notebooks/{src.name}").decode("utf-8") == learner_source(full)
        assert "normlab/_course/LEARNER-COPIES-ONLY.txt" in names
        assert z.read("normlab/_course/book/glossary.md") == (built_from / "book" / "glossary.md").read_bytes()
        assert "normlab/course/__init__.py" in names and any(n.startswith("normlab/records/") for n in names)
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        requires = [line.split(":", 1)[1].strip() for line in z.read(meta).decode("utf-8").splitlines()
                    if line.startswith("Requires-Dist: torch")]
        assert "normlab-course = normlab.course:main" in z.read(entry).decode("utf-8")
    declared = next(d for d in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
                    ["dependencies"] if d.startswith("torch"))
    assert declared == "torch>=2.7.1,<2.15" and len(requires) == 1
    assert sorted(requires[0].removeprefix("torch").split(",")) == sorted(declared.removeprefix("torch").split(","))


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """The wheel unpacked as pip installs a pure-Python wheel, then made read-only (site-packages that
    a learner cannot write); a learner's HOME and workspace elsewhere; `normlab.course init` run from it."""
    base = tmp_path_factory.mktemp("install")
    site, home, ws = base / "site-packages", base / "home", base / "home" / "my course"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    home.mkdir()
    for p in site.rglob("*"):
        p.chmod(stat.S_IREAD | (stat.S_IEXEC if p.is_dir() else 0))
    site.chmod(stat.S_IREAD | stat.S_IEXEC)
    before = snapshot(site)
    caches = base / "caches"     # matplotlib's font cache (normlab imports it), kept out of the learner's HOME
    env = dict(os.environ, PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", HOME=str(home), USERPROFILE=str(home),
               MPLCONFIGDIR=str(caches / "mpl"), XDG_CACHE_HOME=str(caches), XDG_CONFIG_HOME=str(caches))
    code = ("import sys, normlab.course as c; print(c.__file__); "
            f"sys.exit(c.main(['init', {str(ws)!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=base, env=env, capture_output=True, text=True,
                          encoding="utf-8")
    yield {"site": site, "home": home, "ws": ws, "proc": proc, "before": before, "after": snapshot(site), "env": env}
    for p in [site, *site.rglob("*")]:
        if p.is_dir():
            p.chmod(stat.S_IRWXU)


def test_init_from_a_read_only_install_writes_only_the_learners_folder(installed):
    proc, site, ws = installed["proc"], installed["site"], installed["ws"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0].startswith(str(site))           # the wheel's code, not the checkout's
    assert installed["after"] == installed["before"]                   # the install is untouched
    assert {p.relative_to(installed["home"]).parts[0] for p in installed["home"].rglob("*")} == {"my course"}
    lessons = sorted(p.name for p in ws.glob("*.ipynb"))
    assert lessons == [f"{s.stem}.ipynb" for s in SOURCES]
    assert not (ws / "solutions").exists()                             # a learner's init: no answer key
    code = "\n".join("".join(c["source"]) for c in json.loads((ws / "03_layernorm.ipynb").read_text(encoding="utf-8"))
                     ["cells"] if c["cell_type"] == "code")
    assert "raise NotImplementedError" in code


def test_the_files_the_lessons_cite_open_from_the_workspace_read_only(installed):
    copy = installed["ws"] / "normlab-source"
    cited = set()
    for src in SOURCES:
        text = src.read_text(encoding="utf-8")
        cited |= {w.strip("`").rstrip("。，,.;；)）") for w in text.replace("`", " ").split()
                  if w.startswith("normlab/") and w.endswith((".py", ".toml"))}
    assert "normlab/norms.py" in cited
    present = {p for p in cited if (copy / p).is_file()}
    assert present, cited
    for p in present:     # a cited path missing from the package is helper G's test's; what exists is copied
        assert (copy / p).read_bytes() == (installed["site"] / p).read_bytes()
    assert (copy / "glossary.md").read_bytes() == (ROOT / "book" / "glossary.md").read_bytes()
    for p in copy.rglob("*"):
        if p.is_file():
            assert not p.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), p


def first_cells(folder: Path) -> dict[str, str]:
    out = {}
    for p in sorted(folder.rglob("*.ipynb")):
        cell = json.loads(p.read_text(encoding="utf-8"))["cells"][0]
        out[str(p.relative_to(folder))] = (cell["cell_type"], "".join(cell["source"]))
    return out


def test_every_exported_notebook_starts_with_the_same_setup_cell(installed, tmp_path):
    from normlab import course

    course.export(tmp_path / "nbval")                                   # the test run's copies too
    cells = {**{f"workspace/{k}": v for k, v in first_cells(installed["ws"]).items()},
             **{f"nbval/{k}": v for k, v in first_cells(tmp_path / "nbval").items()}}
    assert len(cells) >= 2 * len(SOURCES)
    assert set(cells.values()) == {("code", course.SETUP_SOURCE)}
    assert "find_spec(\"normlab\") is None" in course.SETUP_SOURCE


def run_setup_cell(tmp_path: Path, isolated: bool, env: dict | None = None) -> subprocess.CompletedProcess:
    """The setup cell in a fresh interpreter, with subprocess.run recorded instead of run. `isolated`:
    `python -S`, which sees no site-packages, so no normlab: a hosted notebook without the course."""
    from normlab.course import SETUP_SOURCE

    prelude = ("import subprocess, json\n"
               "subprocess.run = lambda cmd, **kw: print('RUN', json.dumps(cmd))\n")
    return subprocess.run([sys.executable, *(["-S"] if isolated else []), "-c", prelude + SETUP_SOURCE],
                          cwd=tmp_path, capture_output=True, text=True, encoding="utf-8",
                          env=dict(os.environ, **(env or {})))


def test_the_setup_cell_does_nothing_where_normlab_is_installed(tmp_path):
    (tmp_path / "normlab-0.1.0-py3-none-any.whl").write_bytes(b"")   # even with a wheel beside it
    proc = run_setup_cell(tmp_path, isolated=False)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""


def test_the_setup_cell_installs_the_course_where_it_is_missing(tmp_path):
    wheel = tmp_path / "normlab-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    proc = run_setup_cell(tmp_path, isolated=True)
    assert proc.returncode == 0, proc.stderr
    runs = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("RUN ")]
    assert len(runs) == 1 and runs[0][1:] == ["-m", "pip", "install", "-q", str(wheel)]
    proc = run_setup_cell(tmp_path, isolated=True, env={"NORMLAB_INSTALL": "/srv/course/normlab.whl"})
    assert [json.loads(line[4:])[-1] for line in proc.stdout.splitlines() if line.startswith("RUN ")] == \
        ["/srv/course/normlab.whl"]


def test_the_setup_cell_says_what_to_do_when_it_finds_nothing_to_install(tmp_path):
    proc = run_setup_cell(tmp_path, isolated=True, env={"NORMLAB_INSTALL": ""})
    assert proc.returncode != 0 and "RUN" not in proc.stdout
    assert "NORMLAB_INSTALL" in proc.stderr and "normlab is not installed" in proc.stderr
    assert "Traceback" not in proc.stderr                               # SystemExit: the message alone


@pytest.mark.parametrize("args, says", [([], "需要一个命令"), (["reset", "99_nothing", "{ws}"], "需要一个课名"),
                                        (["reset", "{ws}"], "需要一个课名")])
def test_the_command_explains_bad_input_in_one_line(args, says, tmp_path):
    args = [a.format(ws=tmp_path / "ws") for a in args]
    proc = subprocess.run([sys.executable, "-m", "normlab.course", *args], capture_output=True, text=True,
                          encoding="utf-8", cwd=tmp_path)
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "ws").exists() or not list((tmp_path / "ws").iterdir())


def test_an_older_triton_than_the_kernel_was_checked_with_is_not_used(monkeypatch):
    """torch 2.4's CUDA wheel brings Triton 3.0, whose interpreter gives a wrong h in lesson 04's fused
    kernel (nbval on torch 2.4.0): the course's declared torch range includes such hosts, so the kernel
    is offered only from the `fused` extra's floor up (and lesson 04 prints how to get it)."""
    from importlib import metadata

    from normlab import fused

    monkeypatch.setattr(fused, "_kernel_module", None)
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "3.0.0" if name == "triton" else real(name))
    assert fused.triton_version() == (3, 0) and fused.available() is False
    if fused.importlib.util.find_spec("triton") is not None:            # the test venv has the extra
        monkeypatch.setattr(metadata, "version", lambda name: f"{fused.TRITON_MIN[0]}.{fused.TRITON_MIN[1]}.0"
                            if name == "triton" else real(name))
        assert fused.available() is True


# ------------------------------------------------------------------------------- learners' copies only

def answer_lines(src: Path) -> list[str]:
    """The answer key of a full source, read with jupytext (not with normlab.course.answer_key): every line
    between the solution markers, every solution-only line, the code of every solution-tagged cell and
    every teacher note's text -- each line long enough to be telling."""
    import jupytext

    from normlab import course

    lines = []
    for cell in jupytext.read(src).cells:
        inside = False
        whole = course.is_solution_cell(cell) or course.is_teacher_note(cell)
        for line in cell.source.split("\n"):
            s = line.strip()
            if s in (course.BEGIN, course.MD_BEGIN):
                inside = True
            elif s in (course.END, course.MD_END):
                inside = False
            elif (whole or inside or s.endswith(course.ONLY)) and len(s) >= 12:
                lines.append(s)
    return lines


def test_the_wheel_carries_no_answer_and_the_same_learner_copies(wheel):
    """No line of the answer key is in the wheel unless the learner copy shows it anyway (a common line
    such as `super().__init__()`); and the wheel's sources give the learner copies the full ones give."""
    import jupytext

    from normlab import course

    def learner_cells(nb):
        return [(c.cell_type, c.source) for c in course.versions(course.without_teacher_notes(nb), learner=True).cells]

    keyed = 0
    with zipfile.ZipFile(wheel) as z:
        everything = "\n".join(z.read(n).decode("utf-8", "replace") for n in z.namelist() if "_course/" in n)
        for src in SOURCES:
            carried = z.read(f"normlab/_course/notebooks/{src.name}").decode("utf-8")
            carried_lines = {line.strip() for line in carried.split("\n")}
            full = learner_cells(jupytext.read(src))
            shown = "\n".join(source for _, source in full)
            key = answer_lines(src)
            keyed += len(key)
            leaked = [line for line in key if line in carried_lines and line not in shown]
            assert not leaked, (src.name, leaked[:5])
            assert learner_cells(jupytext.reads(carried, fmt="md:myst")) == full, src.name
    assert keyed > 100                                   # 01.1's branch, 08's reference LayerNorm, the notes ...
    assert "return x + self.branch(x)" in (ROOT / "notebooks" / "01_residuals.md").read_text(encoding="utf-8")
    assert "return x + self.branch(x)" not in everything


def test_init_solutions_from_the_wheel_is_refused_and_says_where_they_are(installed):
    env = installed["env"]
    target = installed["home"] / "x"
    proc = subprocess.run([sys.executable, "-c", "import sys, normlab.course as c; sys.exit(c.main(sys.argv[1:]))",
                           "init", str(target), "--solutions"], env=env, capture_output=True, text=True,
                          encoding="utf-8", cwd=installed["home"])          # (cwd: not the checkout's normlab)
    assert proc.returncode == 2 and "--from" in proc.stderr and "no solutions" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (target / "solutions").exists()


def test_a_teachers_solutions_come_from_the_repository(installed, tmp_path):
    env = installed["env"]
    target = tmp_path / "teacher"
    proc = subprocess.run([sys.executable, "-c", "import sys, normlab.course as c; sys.exit(c.main(sys.argv[1:]))",
                           "init", str(target), "--solutions", "--from", str(ROOT)], env=env, capture_output=True,
                          text=True, encoding="utf-8", cwd=installed["home"])
    assert proc.returncode == 0, proc.stderr
    text = (target / "solutions" / "01_residuals.ipynb").read_text(encoding="utf-8")
    assert "return x + self.branch(x)" in text


# ------------------------------------------------------------------------------- private by default

def modes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode) for p in [folder, *folder.rglob("*")]}


def run_as_learner(args: list[str], home: Path, cwd: Path, umask: int = 0o000) -> subprocess.CompletedProcess:
    """`python ARGS` as a learner whose umask lets everything through (0000) and whose home is 0755."""
    env = dict(os.environ, HOME=str(home), USERPROFILE=str(home), PYTHONPATH=str(ROOT), PYTHONUTF8="1")
    for name in ("NORMLAB_DRILLS_FILE", "NORMLAB_PREDICTIONS"):
        env.pop(name, None)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          encoding="utf-8", preexec_fn=lambda: os.umask(umask), timeout=300)


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes (a Windows home is private by its ACL)")
def test_the_course_writes_a_learners_files_for_their_eyes_only(tmp_path):
    home = tmp_path / "张三 的家"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    (home / ".normlab").mkdir(mode=0o755)            # left by an older course version: tightened too
    (home / ".normlab").chmod(0o755)
    ws = home / "normlab-course"
    out = run_as_learner(["-m", "normlab.course", "init", str(ws)], home, tmp_path)
    assert out.returncode == 0, out.stderr
    answer = ws / "my_layernorm.py"
    answer.write_text("import torch\nfrom torch import nn\nLayerNorm = nn.LayerNorm\n", encoding="utf-8")
    out = run_as_learner(["-m", "normlab.drills", "layernorm", str(answer)], home, ws)
    assert out.returncode == 0, out.stdout + out.stderr
    out = run_as_learner(["-c", "from normlab.course import predictions as p; e = p.entries('01')[0]; "
                          "p.save_guess('01', e['id'], e['keys'][0])"], home, ws)
    assert out.returncode == 0, out.stderr
    out = run_as_learner(["-m", "normlab.course", "reset", "03", str(ws)], home, tmp_path)
    assert out.returncode == 0, out.stderr
    written = {**{f"ws/{k}": v for k, v in modes(ws).items() if k != "my_layernorm.py"},
               **{f".normlab/{k}": v for k, v in modes(home / ".normlab").items()}}
    assert {".normlab/drills.json", ".normlab/predictions.json", "ws/03_layernorm.ipynb"} <= set(written)
    assert any(k.startswith("ws/.backup/") for k in written)
    open_to_others = {k: oct(v) for k, v in written.items() if v & 0o077}
    assert not open_to_others, open_to_others
    assert written["ws/."] == written[".normlab/."] == 0o700
    assert written["ws/00_course_map.ipynb"] == written[".normlab/drills.json"] == 0o600
