"""The learner on Simplified-Chinese Windows, played here (issue 24).

Python on Simplified-Chinese Windows reads and prints in the ANSI code page cp936 (GBK) unless told
otherwise, and the learner's folders are often named in Chinese, with spaces. Here a GBK locale is
built into a temporary LOCPATH (glibc's ``localedef -i zh_CN -f GBK``), which makes Python's
preferred encoding and its stdout GBK exactly as on such a machine, and every learner step runs in a
subprocess under it, from a folder named ``学习 课程/normlab 课程``, without PYTHONUTF8 (the learner's
own Python, before run.py sets it):

* run.py's usage text and its environment check / torch choice (run.py imported by path from there);
* the drills CLI on a correct and a wrong submission, directly and through a pipe (``| cat``): the
  whole report arrives, every finding line, symbols GBK lacks as readable ASCII ([OK]/[X], - , ^2);
* exercises.check, the companion's catalogue, a sweep record, normlab.setup() in one session;
* notebook 00 executed through a kernel (nbclient);
* pytest with two xdist workers from such a folder, with PYTHONUTF8=1 as run.py sets it.

And the console helper every other entry point calls (normlab.console.console_safe): the fallbacks, the
entry points that call it, and the crash it prevents (print("✓") on a GBK stream without it).
Where no GBK locale can be built (no localedef, no GBK charmap, not Linux) the GBK tests skip, saying why.
"""

from __future__ import annotations

import ast
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "drill_corpus"
FOLDER = Path("学习 课程") / "normlab 课程"          # a learner's folder: Chinese characters and a space
CHARMAPS = Path("/usr/share/i18n/charmaps")
# GBK lacks these; the reports print them (✓/✗ in drills and exercises, − and ² in formulas)
NOT_IN_GBK = "✓✗−²∂"


# ------------------------------------------------------------------ the console helper, on any machine

def gbk_stream() -> tuple[io.TextIOWrapper, io.BytesIO]:
    raw = io.BytesIO()
    return io.TextIOWrapper(raw, encoding="gbk", write_through=True), raw


def test_a_gbk_console_lacks_the_report_symbols_and_print_crashes_without_console_safe():
    for ch in NOT_IN_GBK:
        with pytest.raises(UnicodeEncodeError):
            ch.encode("gbk")
    stream, _ = gbk_stream()
    with pytest.raises(UnicodeEncodeError):
        print("✓ 通过 (passed)", file=stream)


def test_console_safe_prints_readable_fallbacks_on_a_gbk_stream():
    from normlab.console import CONSOLE_FALLBACK, console_safe

    stream, raw = gbk_stream()
    console_safe(stream)
    print("✓ 通过 · ✗ 未通过：(x−μ)/sqrt(σ²+ε) ∂L ⚠ 🙂", file=stream)
    assert raw.getvalue().decode("gbk") == "[OK] 通过 · [X] 未通过：(x-μ)/sqrt(σ^2+ε) dL (!) ?\n"
    assert all(v.isascii() for v in CONSOLE_FALLBACK.values())
    utf8 = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    console_safe(utf8)
    print("✓ ✗ −", file=utf8)                                   # a UTF-8 console keeps the real symbols
    assert utf8.buffer.getvalue().decode("utf-8") == "✓ ✗ −\n"
    console_safe(io.StringIO())                                  # not reconfigurable: left alone, no error


ENTRY_POINTS = {   # every command-line entry point outside the drills (which have console.say) -> its main
    "normlab/bench.py": "main", "normlab/widgets/gradflow.py": "main", "tools/sweep.py": "main",
    "tools/gpu_bench.py": "main", "tools/bench_gradflow.py": "main", "tools/bench_widgets.py": "main",
    "tools/notebooks.py": "main", "tools/book.py": "main", "normlab/course/__init__.py": "main",
}


@pytest.mark.parametrize("path", sorted(ENTRY_POINTS))
def test_entry_points_call_console_safe_first(path):
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == ENTRY_POINTS[path])
    calls = [ast.unparse(n.func) for n in ast.walk(main) if isinstance(n, ast.Call)]
    assert calls and "console_safe" in calls[:2], f"{path}: {ENTRY_POINTS[path]}() should call console_safe() first"



def test_console_safe_costs_no_torch_import():
    """tools/notebooks.py calls it on every `run.py course` start: importing it must not pull in torch."""
    out = subprocess.run([sys.executable, "-c", "import sys, normlab.console; print(sorted({'torch', 'numpy', "
                          "'matplotlib'} & set(sys.modules)))"], capture_output=True, text=True, encoding="utf-8",
                         timeout=60, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr

# ------------------------------------------------------------------ the GBK learner

@dataclass
class Learner:
    """The learner's folder and environment. On Linux a file name is bytes: a process under the GBK locale
    reads a name as GBK, so the folder and every Chinese name here are made as GBK bytes; the learner's
    processes then see 学习 课程/normlab 课程 exactly (Windows stores names as Unicode: no such step there)."""
    env: dict[str, str]
    encoding: str            # the locale's: gbk or gb18030
    folder: Path             # this (UTF-8) process's name for the folder
    seen_as: str             # the learner's processes' name for it
    python: str              # the Python the learner's steps run (learner_python)

    def path(self, name: str) -> Path:
        """This process's name for the learner's file ``name`` (relative to the folder)."""
        return Path(os.fsdecode(os.fsencode(self.folder) + b"/" + name.encode(self.encoding)))

    def run(self, args, shell: bool = False, timeout: float = 120, **extra_env) -> tuple[int, str]:
        """Run a command from the learner's folder under the GBK locale; (exit code, output decoded as GBK).
        Decoding is strict: output that is not valid GBK fails the test."""
        env = {**self.env, **extra_env}
        p = subprocess.run(args, cwd=self.folder, env=env, shell=shell, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
        return p.returncode, p.stdout.decode(self.encoding)

    def run_python(self, code: str, name: str = "learner_step.py", **kw) -> tuple[int, str]:
        self.path(name).write_text(textwrap.dedent(code), encoding="utf-8")
        return self.run([self.python, self.path(name).name], **kw)


def learner_python(base: Path) -> str:
    """This test run's Python as the learner's processes start it: through a link from `base` (an ASCII
    temporary folder) to its venv. The clone's own folder may be named in bytes the simulated locale
    cannot decode (a folder named in UTF-8 on a machine whose locale is GB18030): the child would see its
    own path with surrogates, and torch, which encodes its path as strict UTF-8 on import, would fail on
    the clone's name rather than on anything the course does (issue 36 item 8)."""
    if sys.prefix == sys.base_prefix:                    # not a venv: a system Python, reached as it is
        return sys.executable
    link = base / "venv"
    link.symlink_to(sys.prefix, target_is_directory=True)
    return str(link / Path(sys.executable).relative_to(sys.prefix))


def _locale_env(locpath: Path | None, name: str) -> dict[str, str]:
    drop = ("LANG", "LANGUAGE", "PYTHONUTF8", "PYTHONIOENCODING", "PYTHONPATH", "MPLBACKEND")   # MPLBACKEND=Agg: no figures
    env = {k: v for k, v in os.environ.items() if not k.startswith("LC_") and k not in drop}
    env.update(LC_ALL=name, NORMLAB_DRILLS_FILE="off", OMP_NUM_THREADS="1")
    if locpath is not None:
        env["LOCPATH"] = str(locpath)
    return env


@pytest.fixture(scope="module")
def learner(tmp_path_factory) -> Learner:
    if not sys.platform.startswith("linux"):
        pytest.skip("the GBK learner is played with a glibc locale (Linux); on Windows the machine's own code page runs")
    base = tmp_path_factory.mktemp("gbk")
    env = None
    if shutil.which("localedef") and any((CHARMAPS / f).exists() for f in ("GBK", "GBK.gz")):
        locpath = base / "locales"
        locpath.mkdir()
        subprocess.run(["localedef", "-i", "zh_CN", "-f", "GBK", str(locpath / "zh_CN.GBK")],
                       capture_output=True, timeout=60)
        if (locpath / "zh_CN.GBK").exists():
            env = _locale_env(locpath, "zh_CN.GBK")
    if env is None:
        have = subprocess.run(["locale", "-a"], capture_output=True, timeout=30).stdout.decode("ascii", "replace")
        found = [n for n in have.split() if n.lower() in ("zh_cn.gbk", "zh_cn.gb18030")]
        if not found:
            pytest.skip("no GBK locale: neither localedef with the GBK charmap (Debian: the locales package) "
                        "nor an installed zh_CN.GBK / zh_CN.gb18030 locale")
        env = _locale_env(None, found[0])
    encoding = "gb18030" if env["LC_ALL"].lower().endswith("gb18030") else "gbk"
    folder = Path(os.fsdecode(os.fsencode(base) + b"/" + str(FOLDER).encode(encoding)))
    folder.mkdir(parents=True)
    # the course's package itself from the learner's folder (records, TOML data and fonts read from there)
    shutil.copytree(ROOT / "normlab", folder / "normlab", ignore=shutil.ignore_patterns("__pycache__"))
    env["PYTHONPATH"] = str(folder)
    learner = Learner(env, encoding, folder, f"{base}/{FOLDER}", learner_python(base))
    code, out = learner.run_python("""
        import importlib.util, locale, sys
        from pathlib import Path
        print(locale.getpreferredencoding(False), sys.stdout.encoding, sys.flags.utf8_mode)
        print(Path.cwd(), Path(importlib.util.find_spec("normlab").origin).parent.parent, sep="\\n")
    """, timeout=60)
    assert code == 0, out
    seen = out.split()
    if seen[:1] not in (["GBK"], ["GB18030"]):
        pytest.skip(f"the GBK locale did not take effect (Python's preferred encoding: {out!r})")
    assert seen[1].lower() == encoding and seen[2] == "0", out      # as on the learner's Windows: no UTF-8 mode
    assert out.splitlines()[1:3] == [learner.seen_as] * 2, out      # cwd and normlab: the Chinese folder
    return learner


def test_under_this_locale_a_utf8_file_read_without_encoding_fails(learner):
    """The hazard is real here: the course's UTF-8 files read with the locale's encoding break."""
    learner.path("课程说明.md").write_text("# 归一化实验室 NormLab：残差、BatchNorm、LayerNorm\n", encoding="utf-8")
    code, out = learner.run_python("""
        from pathlib import Path
        try:
            Path("课程说明.md").read_text()
        except UnicodeDecodeError as err:
            print("UnicodeDecodeError", err.encoding)
        print(Path("课程说明.md").read_text(encoding="utf-8").strip())
    """)
    assert code == 0, out
    assert "UnicodeDecodeError gbk" in out and "归一化实验室 NormLab" in out


def test_run_py_usage_environment_check_and_torch_choice(learner):
    """run.py from a Chinese folder: its usage text, then the functions the install step runs before any
    venv exists (no requirements-tested*.txt here, so torch_requirement reads pyproject.toml, which has
    Chinese in it: the read that once raised UnicodeDecodeError under GBK)."""
    for name in ("run.py", "pyproject.toml"):
        shutil.copy(ROOT / name, learner.folder / name)
    code, out = learner.run([learner.python, "run.py"])
    assert code == 2 and "run.py course" in out and "UnicodeEncodeError" not in out, out
    code, out = learner.run_python("""
        import importlib.util, json, os
        from pathlib import Path
        spec = importlib.util.spec_from_file_location("learner_run", Path("run.py").resolve())
        run = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(run)
        run.utf8_everywhere()
        result = {"root": str(run.ROOT), "torch": run.torch_requirement(), "choice": run.torch_choice(),
                  "stamp": run.wanted_stamp(), "lock": str(run.lock_file()), "utf8": os.environ.get("PYTHONUTF8")}
        Path("run_check.json").write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
        run.say(f"torch: {result['torch']}，{result['choice'][1]}")
    """)
    assert code == 0, out
    result = json.loads((learner.folder / "run_check.json").read_text(encoding="utf-8"))
    assert result["root"] == learner.seen_as
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert result["torch"] == next(d.replace(" ", "") for d in project["dependencies"] if d.startswith("torch"))
    assert result["choice"][0] in ("cpu", "default")
    # here (Linux) the folder is named in GBK bytes, which UTF-8 mode would read as surrogates: run.py leaves it
    # off (utf8_mode_helps; on Windows, whose names are Unicode, it is on: tests/test_run.py)
    assert result["utf8"] == "0"
    assert f"[normlab] torch: {result['torch']}" in out


def drill_report(kind: str, path: Path) -> str:
    """The report the drills compute for this file in this (UTF-8) process, as a GBK console must show it."""
    from normlab.drills import check
    from normlab.drills.__main__ import load
    from normlab.drills.console import encodable

    return encodable(str(check(kind, load(kind, path))), "gbk")


@pytest.mark.parametrize("name,kind,passes", [("bw_rms_correct.py", "rmsnorm_backward", True),
                                              ("ln_annotated_transformer.py", "layernorm", False)])
def test_drills_cli_prints_the_whole_report_under_gbk_also_through_a_pipe(learner, name, kind, passes):
    shutil.copy(CORPUS / name, learner.folder / name)
    expected = drill_report(kind, CORPUS / name)
    drill = {}
    exec(ast.unparse(next(n for n in ast.parse((CORPUS / name).read_text(encoding="utf-8")).body
                          if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "DRILL")), drill)
    if passes:
        code, out = learner.run([learner.python, "-m", "normlab.drills", kind, name])
        assert code == 0, out
    else:   # through a pipe, as `python -m normlab.drills ... | cat` (the pipe's encoding is the locale's too)
        code, out = learner.run(f'"{learner.python}" -m normlab.drills {kind} {name} | cat', shell=True)
        assert code == 0, out
    assert out.strip().splitlines() == expected.strip().splitlines(), out
    assert ("[OK]" in out) and (("[X]" in out) != passes) and not any(ch in out for ch in NOT_IN_GBK)
    for finding in drill["DRILL"]["findings"]:
        assert any(line.lstrip().startswith(f"[X] [") and f"] {finding}:" in line for line in out.splitlines()), finding


def test_exercises_companion_record_and_setup_in_a_gbk_session(learner):
    code, out = learner.run_python("""
        import json
        from pathlib import Path
        import torch.nn.functional as F
        import normlab
        from normlab import companion, exercises, record
        from normlab.console import console_safe

        console_safe()
        normlab.setup()
        right = exercises.check("03.1", lambda x, G, eps: F.group_norm(x, G, eps=eps))
        wrong = exercises.check("03.1", lambda x, G, eps: F.group_norm(x, G, eps=0.5))
        print(wrong)
        cat = str(companion.catalogue())
        rec = record.recorded("00_course_map")
        Path("session.json").write_text(json.dumps({
            "right": right.passed, "wrong": wrong.passed, "wrong_ids": [f.id for f in wrong.failed],
            "catalogue_rows": len(cat.splitlines()), "has_E3": "E3" in cat,
            "record": rec["notebook"], "runs": len(rec["runs"])}, ensure_ascii=False), encoding="utf-8")
    """, name="会话 session.py")
    assert code == 0, out
    s = json.loads((learner.folder / "session.json").read_text(encoding="utf-8"))
    assert s["right"] and not s["wrong"] and s["wrong_ids"], s
    assert s["has_E3"] and s["catalogue_rows"] > 20 and s["record"] == "00_course_map" and s["runs"] >= 10, s
    assert "normlab: 随机种子 seed = 0" in out                         # setup()'s line, in Chinese, on GBK
    assert "[X]" in out and not any(ch in out for ch in NOT_IN_GBK)  # the wrong answer's report, readable


def test_notebook_00_runs_through_a_kernel_under_gbk(learner):
    """The course's first notebook, executed by a kernel started under the GBK locale from the Chinese folder
    (the kernel inherits both; no PYTHONUTF8): every cell runs, no error output, the figure is drawn."""
    import jupytext
    import nbformat

    nbformat.write(jupytext.read(ROOT / "notebooks" / "00_course_map.md"), learner.path("00 课程地图.ipynb"))
    code, out = learner.run_python("""
        import nbformat
        from nbclient import NotebookClient
        nb = nbformat.read("00 课程地图.ipynb", as_version=4)
        NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
        nbformat.write(nb, "00 executed.ipynb")
    """, timeout=180)
    assert code == 0, out
    nb = json.loads((learner.folder / "00 executed.ipynb").read_text(encoding="utf-8"))
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    text = "".join("".join(o.get("text", "")) for o in outputs)
    assert "max |ours - torch|" in text and "中文字体" in text


def test_pytest_with_two_xdist_workers_from_a_chinese_folder(learner):
    """`python3 run.py test` runs pytest -n 2 with PYTHONUTF8=1 (run.py's utf8_everywhere): from a folder
    named in Chinese (here as a UTF-8 checkout names it, which GBK reads as other characters: the
    case where execnet's bootstrap failed without UTF-8 mode), the two workers start and run."""
    pytest.importorskip("xdist")
    tests = learner.folder.parent.parent / "学习 课程" / "xdist 测试"
    tests.mkdir(parents=True)
    (tests / "test_中文.py").write_text(textwrap.dedent("""
        import pytest
        from pathlib import Path

        @pytest.mark.parametrize("word", ["归一化", "残差", "层归一化", "批归一化"])
        def test_word(word):
            assert Path(__file__).parent.name == "xdist 测试" and len(word) >= 2
    """), encoding="utf-8")
    def pytest_n2(**env) -> tuple[int, str]:
        # only xdist's plugin (the suite's others, nbval, playwright ..., cost start-up time and are not the point)
        p = subprocess.run([learner.python, "-m", "pytest", "-p", "xdist.plugin", "-n", "2", "-q", "-p",
                            "no:cacheprovider", tests.name], cwd=tests.parent, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=120,
                           env={**learner.env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": "", **env})
        return p.returncode, p.stdout.decode("utf-8", errors="replace")

    code, out = pytest_n2(PYTHONUTF8="1")
    assert code == 0 and "4 passed" in out, out
    code, out = pytest_n2()    # the cause removed: the learner's GBK Python without UTF-8 mode
    assert code != 0 and "4 passed" not in out, ("pytest -n 2 now works here without PYTHONUTF8: "
                                                 "run.py's utf8_everywhere comment on execnet is out of date")


# ------------------------------------------------------------------ a folder named in the locale's encoding (issue 36 item 8)

def test_run_py_creates_the_venv_in_a_folder_named_in_the_locales_encoding(learner, tmp_path):
    """A Linux learner with a Chinese locale (here the GBK one built above; issue 36 met it with
    zh_CN.GB18030, checked by hand the same way: the mechanism is one) whose folder is named in that
    encoding (张三 的文件/课程, created under the locale), bytes that are no UTF-8. UTF-8 mode would decode
    them into surrogates that pyvenv.cfg (UTF-8) cannot hold: run.py leaves it off there
    (utf8_mode_helps) and the venv is made; with it forced on (the cause put back) creating the venv
    fails, and run.py names that cause, not python3-venv."""
    folder = Path(os.fsdecode(os.fsencode(tmp_path) + "/张三 的文件/课程".encode(learner.encoding)))
    folder.mkdir(parents=True)
    with pytest.raises(UnicodeDecodeError):
        os.fsencode(folder).decode("utf-8")                       # the name is no UTF-8
    for name in ("run.py", "pyproject.toml"):
        shutil.copy(ROOT / name, folder / name)
    (folder / "step.py").write_text(textwrap.dedent("""
        import importlib.util, json, locale, os, sys
        from pathlib import Path
        spec = importlib.util.spec_from_file_location("learner_run", Path("run.py").resolve())
        run = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(run)
        run.utf8_everywhere()
        said = {"locale": locale.getpreferredencoding(False), "utf8": os.environ["PYTHONUTF8"]}
        said["made"] = run.create_venv(sys.executable, run.ROOT / "venv-a", "--without-pip")
        os.environ["PYTHONUTF8"] = "1"                            # the cause, put back
        said["forced"] = run.create_venv(sys.executable, run.ROOT / "venv-b", "--without-pip")
        Path("said.json").write_text(json.dumps(said, ensure_ascii=False), encoding="utf-8")
    """), encoding="utf-8")
    p = subprocess.run([learner.python, "step.py"], cwd=folder, env=learner.env, capture_output=True, timeout=120)
    assert p.returncode == 0, (p.stdout + p.stderr).decode(learner.encoding, "replace")
    said = json.loads((folder / "said.json").read_text(encoding="utf-8"))
    assert said["locale"].lower() == learner.encoding and said["utf8"] == "0", said
    assert said["made"] is None and (folder / "venv-a" / "pyvenv.cfg").exists(), said
    assert said["forced"] and "surrogates" in said["forced"] and "python3-venv" not in said["forced"], said
