#!/usr/bin/env python3
"""NormLab's task runner: the only commands a learner needs.

    python3 run.py course    # 创建 .venv（若缺失）并在 JupyterLab 中打开课程第一课
    python3 run.py test      # 创建 .venv（若缺失）并运行全部测试（pytest + nbval 执行所有 notebook）

    python3 run.py book      # 离线构建静态网页版课程 build/book/html/index.html
    python3 run.py slides    # 为每课生成 reveal.js 幻灯片 build/slides/*.slides.html

Both create the virtual environment in .venv/ at the repository root when it is missing
(or when pyproject.toml / requirements-tested.txt changed since it was made). Nothing
else needs to be installed by hand. Only the standard library is used here, so this
file runs with any Python 3.11+ before the environment exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".normlab-installed"
LOCK = ROOT / "requirements-tested.txt"
FIRST_NOTEBOOK = "00_course_map"
IS_WINDOWS = os.name == "nt"


def say(msg: str) -> None:
    print(f"[normlab] {msg}", flush=True)


def venv_bin(name: str) -> Path:
    sub = "Scripts" if IS_WINDOWS else "bin"
    return VENV / sub / (name + (".exe" if IS_WINDOWS else ""))


def run(cmd: list[str | Path], **kw) -> int:
    return subprocess.call([str(c) for c in cmd], cwd=ROOT, **kw)


def wanted_stamp() -> str:
    h = hashlib.sha256()
    for f in (ROOT / "pyproject.toml", LOCK):
        if f.exists():
            h.update(f.read_bytes())
    return h.hexdigest()


COURSE_EXTRAS = ("test", "book")          # what `course`, `book` and `slides` need
TEST_EXTRAS = ("test", "book", "fused")    # `test` also checks the optional Triton kernel (normlab/fused.py)


def installed_extras() -> set[str]:
    """The extras the current .venv was installed with, if it matches pyproject/requirements."""
    if not STAMP.exists():
        return set()
    lines = STAMP.read_text().split()
    if not lines or lines[0] != wanted_stamp():
        return set()
    return set(lines[1].split(",")) if len(lines) > 1 else set(COURSE_EXTRAS)


def ensure_env(extras: tuple[str, ...] = COURSE_EXTRAS) -> Path:
    """Create .venv and install normlab with its dependencies, unless already up to date."""
    if sys.version_info < (3, 11):
        say(f"需要 Python 3.11 或更新版本，当前是 {sys.version.split()[0]}。(Python 3.11+ is required.)")
        sys.exit(1)
    py = venv_bin("python")
    if not py.exists():
        say("创建虚拟环境 .venv/ (creating the virtual environment) ...")
        if run([sys.executable, "-m", "venv", VENV]) != 0:
            say("无法创建 .venv：请确认已安装 python3-venv。(could not create .venv; is python3-venv installed?)")
            sys.exit(1)
    have = installed_extras()
    if set(extras) <= have:
        return py
    extras = tuple(sorted(set(extras) | have, key=TEST_EXTRAS.index))
    say("安装依赖 (installing dependencies: torch 2.13.0 CPU, JupyterLab, ...)，首次约需 1–3 分钟 ...")
    t0 = time.time()
    base = [py, "-m", "pip", "install", "--disable-pip-version-check", "-e", f".[{','.join(extras)}]"]
    code = run(base + ["-c", LOCK]) if LOCK.exists() else 1
    if code != 0:
        say("按测试过的精确版本 (requirements-tested.txt) 安装失败，改用 pyproject.toml 的版本范围重试 ...")
        code = run(base)
    if code != 0:
        say("依赖安装失败，见上方 pip 的输出。(pip install failed; see pip's output above.)")
        sys.exit(code)
    configure_jupyter()
    STAMP.write_text(f"{wanted_stamp()}\n{','.join(extras)}\n")
    say(f"环境就绪 (environment ready) in {time.time() - t0:.0f} s")
    return py


def configure_jupyter() -> None:
    """JupyterLab settings that live inside .venv: no news pop-up, no update check."""
    settings = VENV / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    overrides = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}
    (settings / "overrides.json").write_text(json.dumps(overrides, indent=2))


CHROMIUM = Path("/usr/bin/chromium")


def ensure_browser() -> None:
    """Debian's Chromium and a CJK font for the real-browser tests (Playwright never downloads one).
    Installed with apt-get when running as root on Debian/Ubuntu (CI); otherwise those tests skip."""
    if CHROMIUM.exists() or not sys.platform.startswith("linux"):
        return
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        say("安装 Chromium 与中文字体供浏览器测试使用 (apt-get install chromium fonts-noto-cjk) ...")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if run(["apt-get", "update", "-qq"], env=env) == 0:
            run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium", "fonts-noto-cjk"], env=env)
    if not CHROMIUM.exists():
        say("未找到 /usr/bin/chromium：浏览器测试将跳过 (browser tests will be skipped)。"
            "Debian/Ubuntu 上可运行 sudo apt-get install chromium fonts-noto-cjk。")


def export_notebooks(py: Path, out: Path, keep_existing: bool) -> None:
    code = run([py, ROOT / "tools" / "notebooks.py", "export", "--out", out] + (["--keep-existing"] if keep_existing else []))
    if code != 0:
        sys.exit(code)


def cmd_course(args: list[str]) -> int:
    """Copy the notebooks into workspace/ (your own copies: edit freely) and open JupyterLab."""
    py = ensure_env()
    reset = "--reset" in args
    workspace = ROOT / "workspace"
    if reset and workspace.exists():
        shutil.rmtree(workspace)
    export_notebooks(py, workspace, keep_existing=True)
    say(f"打开 JupyterLab：workspace/{FIRST_NOTEBOOK}.ipynb（workspace/ 里是你自己的副本，可随意修改；"
        f"python3 run.py course --reset 恢复原样）")
    cmd = [venv_bin("jupyter"), "lab", f"workspace/{FIRST_NOTEBOOK}.ipynb"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    cmd += [a for a in args if a != "--reset"]
    if IS_WINDOWS:
        return run(cmd)
    os.chdir(ROOT)
    os.execv(str(cmd[0]), [str(c) for c in cmd])  # JupyterLab takes over this process (Ctrl-C stops it)


def cmd_test(args: list[str]) -> int:
    """pytest for normlab plus nbval over every notebook, two workers, one notebook per worker."""
    py = ensure_env(TEST_EXTRAS)
    ensure_browser()
    t0 = time.time()
    nbdir = ROOT / "build" / "nbval"
    export_notebooks(py, nbdir, keep_existing=False)
    paths = [a for a in args if not a.startswith("-") and (ROOT / a.split("::")[0]).exists()]
    targets = [] if paths else ["tests", str(nbdir.relative_to(ROOT))]
    # Two notebooks run at once (two pytest workers, and the book build's two executors): one
    # thread each. Two OpenMP pools of two threads on two cores spin against each other and run
    # many times slower than one thread each.
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONHASHSEED="0", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    code = run([py, "-m", "pytest", *targets, "--nbval-lax", "--nbval-current-env",
                "--nbval-cell-timeout", "300", "-n", "2", "--dist", "loadscope", "-p", "no:cacheprovider",
                "--durations", "15",
                *args], env=env)
    say(f"测试用时 (test time): {time.time() - t0:.0f} s, exit code {code}")
    return code


def cmd_freeze(args: list[str]) -> int:
    """(maintainers) Record the exact versions in .venv after a passing test run."""
    py = ensure_env(TEST_EXTRAS)
    out = subprocess.run([str(py), "-m", "pip", "freeze", "--exclude-editable"], capture_output=True, text=True,
                         check=True).stdout
    pins = sorted(line.split("+")[0] for line in out.splitlines() if "==" in line)  # drop +cpu labels
    header = ["# Exact versions of the last passing `python3 run.py test` (Python "
              f"{sys.version_info.major}.{sys.version_info.minor}, Linux x86-64, CPU).",
              "# Used as pip constraints by run.py. Regenerate with: python3 run.py freeze"]
    LOCK.write_text("\n".join(header + pins) + "\n")
    STAMP.write_text(f"{wanted_stamp()}\n{','.join(TEST_EXTRAS)}\n")
    say(f"{len(pins)} versions -> {LOCK.name}")
    return 0


def cmd_sweep(args: list[str]) -> int:
    """(maintainers) Seeds 0-4 x torch threads {1, 2} over every notebook; writes normlab/records/."""
    return run([ensure_env(TEST_EXTRAS), ROOT / "tools" / "sweep.py", *args])


def cmd_book(args: list[str]) -> int:
    """Build the static book offline: build/book/html/index.html."""
    return run([ensure_env(), ROOT / "tools" / "book.py", "book", *args])


def cmd_slides(args: list[str]) -> int:
    """Build reveal.js lecture slides for every notebook: build/slides/NN_name.slides.html."""
    return run([ensure_env(), ROOT / "tools" / "book.py", "slides", *args])


COMMANDS = {"course": cmd_course, "test": cmd_test, "book": cmd_book, "slides": cmd_slides, "freeze": cmd_freeze,
            "sweep": cmd_sweep}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__)
        return 2
    return COMMANDS[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
