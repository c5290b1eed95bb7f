#!/usr/bin/env python3
"""NormLab's task runner: the only commands a learner needs.

    python3 run.py course    # 创建 .venv（若缺失）并在 JupyterLab 中打开课程第一课
    python3 run.py test      # 创建 .venv（若缺失）并运行全部测试（pytest + nbval 执行所有 notebook）

    python3 run.py book      # 离线构建静态网页版课程 build/book/html/index.html
    python3 run.py slides    # 为每课生成 reveal.js 幻灯片 build/slides/*.slides.html
    python3 run.py drills layernorm my_ln.py   # 面试手撕检查器（不用激活 .venv）；--progress 进度表，--help 每张卡片要写什么

教师 (teachers)：教师指南 book/instructor.md（90 分钟课案、作业、评分）；python3 run.py book --teacher
构建带答案和教师指南的教师版网页书；deploy/ 是班级服务器（JupyterHub）的部署文件（见 deploy/README.md）。

    python3 run.py course --reset 03      # 把 workspace/ 里第 03 课恢复原样（旧副本移到 workspace/.backup/）
    python3 run.py course --reset-all     # 全部恢复原样，包括你写的练习答案（同样先备份）
    python3 run.py course --torch cpu     # 选 torch 版本：auto（默认）、cpu 或 default（见 README「安装」）

    python3 run.py test --python 3.13     # (maintainers) 用 Python 3.13 的独立环境 build/venvs/py3.13/ 跑全部测试
    python3 run.py freeze [--python 3.13] # (maintainers) 把该环境的精确版本写进 requirements-tested*.txt
    python3 run.py sweep                  # (maintainers) seeds x threads over every notebook -> normlab/records/

Every command first makes sure the virtual environment exists: .venv/ at the repository root
(build/venvs/py3.N/ with --python 3.N), created when it is missing and reinstalled when
pyproject.toml or the requirements-tested file of its Python changed since it was made.
Nothing else needs to be installed by hand. Only the standard library is used here, so this
file runs with any Python 3.11+ before the environment exists.
"""

from __future__ import annotations

import hashlib
import json
import locale
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
FIRST_NOTEBOOK = "00_course_map"
IS_WINDOWS = os.name == "nt"
# PyTorch's own published index of CPU-only wheels (the documented way to get the CPU build on Linux).
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_CHOICES = ("auto", "cpu", "default")


def say(msg: str) -> None:
    print(f"[normlab] {msg}", flush=True)


def venv_dir() -> Path:
    """.venv/, or the folder in NORMLAB_VENV (set by `run.py test --python X` for its own venv, so that
    commands the tests start use the same one)."""
    return Path(os.environ["NORMLAB_VENV"]) if os.environ.get("NORMLAB_VENV") else ROOT / ".venv"


VENV = venv_dir()
STAMP = VENV / ".normlab-installed"


def lock_file(minor: tuple[int, int] = sys.version_info[:2]) -> Path:
    """The constraints tested on this Python: requirements-tested.txt for 3.11 (the course machines'
    and CI's version), requirements-tested-py3.N.txt for the others. A version without one installs
    from the ranges in pyproject.toml."""
    name = "requirements-tested.txt" if tuple(minor) == (3, 11) else f"requirements-tested-py{minor[0]}.{minor[1]}.txt"
    return ROOT / name


LOCK = lock_file()


SUPPORTED_PYTHONS = "3.11、3.12、3.13（或更新的 3.x）"


def use_python(python: str) -> tuple[int, int]:
    """`--python 3.13` (or a path): build that interpreter's venv in build/venvs/py3.13/ and use it."""
    global BASE_PYTHON, VENV, STAMP, LOCK
    is_path = os.sep in python or python.endswith(".exe")
    if not is_path and not _is_supported_version(python):
        say(f"--python 只接受 {SUPPORTED_PYTHONS} 或一个解释器的路径，收到 {python!r}。"
            f"(--python takes 3.11 or newer, or a path to an interpreter)")
        sys.exit(2)
    exe = find_python(python)
    if exe is None:
        say(f"找不到 Python {python}（试过 PATH 上的 python{python}、pyenv 和 py -{python}）。"
            f"(no Python {python} found)")
        sys.exit(2)
    out = subprocess.run([exe, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True,
                         encoding="utf-8", errors="replace")
    try:
        minor = tuple(int(v) for v in out.stdout.split()[:2])
        assert len(minor) == 2
    except (ValueError, AssertionError):
        say(f"{exe} 不是能用的 Python 3（它没有说出自己的版本）。需要 {SUPPORTED_PYTHONS}。"
            f"(not a usable Python 3 interpreter)")
        sys.exit(2)
    if minor < (3, 11):
        say(f"{exe} 是 Python {minor[0]}.{minor[1]}：课程需要 {SUPPORTED_PYTHONS}。(Python 3.11+ is required)")
        sys.exit(2)
    BASE_PYTHON = exe
    VENV = ROOT / "build" / "venvs" / f"py{minor[0]}.{minor[1]}"
    STAMP, LOCK = VENV / ".normlab-installed", lock_file(minor)
    os.environ["NORMLAB_VENV"] = str(VENV)
    return minor


def _is_supported_version(python: str) -> bool:
    """"3.11", "3.13", ...: a 3.x version the course supports (3.11 or newer)."""
    major, _, minor = python.partition(".")
    return major == "3" and minor.isdigit() and int(minor) >= 11


def find_python(python: str) -> str | None:
    """An interpreter for "3.13" (python3.13 on PATH, pyenv's versions, Windows' py -3.13) or a path.
    Each candidate must run: a pyenv shim for a version that is not active fails and is skipped."""
    if os.sep in python or python.endswith(".exe"):
        candidates = [[python]]
    else:
        pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
        candidates = [[shutil.which(f"python{python}")]] if shutil.which(f"python{python}") else []
        candidates += [[str(p)] for p in sorted(pyenv.glob(f"{python}.*/bin/python{python}"), reverse=True)]
        candidates += [["py", f"-{python}"]] if IS_WINDOWS and shutil.which("py") else []
    for cmd in candidates:
        try:
            out = subprocess.run(cmd + ["-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                                 timeout=30, encoding="utf-8")
        except OSError:
            continue
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return None


BASE_PYTHON = sys.executable


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


def read_stamp() -> tuple[set[str], str]:
    """The extras the current venv was installed with, if it matches pyproject/requirements, and the
    torch choice it was installed with ("cpu" or "default"; "" when unknown)."""
    if not STAMP.exists():
        return set(), ""
    lines = STAMP.read_text(encoding="utf-8").split()
    if not lines or lines[0] != wanted_stamp():
        return set(), ""
    extras = set(lines[1].split(",")) if len(lines) > 1 else set(COURSE_EXTRAS)
    return extras, (lines[2] if len(lines) > 2 else "")


def installed_extras() -> set[str]:
    return read_stamp()[0]


# --- which torch: the CPU build on Linux without an NVIDIA GPU -------------------------------------

def has_nvidia_gpu() -> bool:
    """An NVIDIA driver is loaded (Linux) or nvidia-smi is on PATH."""
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def torch_choice(override: str = "auto", system: str = sys.platform, nvidia: bool | None = None) -> tuple[str, str]:
    """("cpu" or "default", why). `override` is --torch / NORMLAB_TORCH: auto, cpu or default."""
    if override == "cpu":
        return "cpu", "你选择了 --torch cpu"
    if override == "default":
        return "default", "你选择了 --torch default"
    if not system.startswith("linux"):
        return "default", "macOS / Windows 上默认的 torch 就是 CPU（Mac 上含 MPS）版"
    if has_nvidia_gpu() if nvidia is None else nvidia:
        return "default", "检测到 NVIDIA GPU：用默认的 CUDA 版 torch（课程不需要 GPU，但可选小节会用它）"
    return "cpu", "Linux、没有 NVIDIA GPU：优先 PyTorch 官方的 CPU 版（小得多）"


def index_reachable(url: str, timeout: float = 10.0, opener=None) -> bool:
    """Whether `url` answers (a pip index page). Uses the learner's proxy settings (urllib reads them)."""
    import urllib.request
    opener = opener or urllib.request.urlopen
    try:
        with opener(url.rstrip("/") + "/torch/", timeout=timeout) as resp:
            return getattr(resp, "status", 200) < 400
    except (OSError, ValueError):   # URLError, HTTPError, timeouts and DNS failures are OSErrors
        return False


def torch_pip_args(choice: str, probe=None) -> tuple[list[str], str]:
    """Extra pip arguments for the torch install and the one line that explains them.

    The CPU index is *added* (--extra-index-url) for the torch step only: the learner's own index
    (a mirror in PIP_INDEX_URL or pip.conf) stays in use and is never written to."""
    if choice != "cpu":
        return [], "torch：默认的轮子 (default wheel)"
    if (probe or index_reachable)(CPU_INDEX):
        return ["--extra-index-url", CPU_INDEX], f"torch：CPU 版，来自 PyTorch 官方的 CPU 轮子索引 {CPU_INDEX}"
    return [], (f"连不上 PyTorch 的 CPU 轮子索引 ({CPU_INDEX})，改用默认的 torch 轮子：在 Linux 上它通常带 CUDA 库，"
                "多下载约 2.6 GB，课程照样能跑。(CPU wheel index unreachable: falling back to the default wheel.)")


def torch_requirement(lock: Path | None = None) -> str:
    """What the torch step installs: the exact tested torch of this Python's constraints file
    ("torch==2.13.0"); without one, the range pyproject.toml declares ("torch>=2.7.1,<2.15")."""
    import tomllib

    lock = LOCK if lock is None else lock
    if lock.exists():
        for line in lock.read_text(encoding="utf-8").splitlines():
            if line.replace(" ", "").lower().startswith("torch=="):
                return line.replace(" ", "")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    return next(d.replace(" ", "") for d in deps if d.replace(" ", "").lower().startswith("torch"))


def torch_build(py: Path) -> str:
    """What the venv's torch is: '2.13.0+cpu (CPU)', '2.13.0 (CUDA 13.0)', ..."""
    code = ("import torch; c = torch.version.cuda; "
            "print(torch.__version__, f'(CUDA {c})' if c else '(CPU)')")
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, encoding="utf-8")
    return out.stdout.strip() or "?"


TORCHS_OWN_PINS = ("triton", "nvidia-", "cuda-")   # packages a torch wheel pins itself (its build decides)


def constraints_for(lock: Path, build: str) -> Path:
    """The constraints file for step 2. A lock made with the other kind of torch build (CPU vs CUDA)
    would fight the installed torch over the packages it pins itself (the CUDA build of 2.13.0 needs
    triton 3.7.1, the CPU lock of 3.11 has triton 3.9.0): those lines are left out, in a copy under
    the venv."""
    text = lock.read_text(encoding="utf-8")
    made_with_cuda = "CUDA" in text.splitlines()[0] if text else False
    if made_with_cuda == ("CUDA" in build):
        return lock
    keep = [line for line in text.splitlines()
            if not line.strip().lower().replace("_", "-").startswith(TORCHS_OWN_PINS)]
    out = VENV / f"constraints-{lock.name}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(keep) + "\n", encoding="utf-8")
    say(f"{lock.name} 是用另一种 torch（{'CUDA' if made_with_cuda else 'CPU'} 版）测出来的："
        "torch 自己固定的 triton / nvidia / cuda 包不再约束。")
    return out


# Installed as dependencies, removed again: jsonschema imports its optional IRI checker rfc3987-syntax
# (asked for by jupyter-events through jsonschema[format-nongpl]) whenever it is imported, and that
# builds about 35 Earley parsers: 0.9 s of CPU in every process that imports jsonschema (JupyterLab,
# each hub server, the book's Sphinx, every nbformat user: 50 in one test run). No Jupyter schema uses
# the iri formats it checks (opendatahub-io/notebooks#3532; python-jsonschema/jsonschema#1428).
SLOW_IMPORTS = {"rfc3987_syntax": "rfc3987-syntax"}


def drop_slow_imports(py: Path) -> None:
    """Uninstall SLOW_IMPORTS from the venv where pip put them (every install brings them back)."""
    sites = [*VENV.glob("lib/python3*/site-packages"), *VENV.glob("Lib/site-packages")]
    there = [dist for module, dist in SLOW_IMPORTS.items() if any((s / module).exists() for s in sites)]
    if there:
        run([py, "-m", "pip", "uninstall", "-y", "-q", *there])


def ensure_env(extras: tuple[str, ...] = COURSE_EXTRAS, torch_override: str | None = None) -> Path:
    """Create the venv and install normlab with its dependencies, unless already up to date.

    Two pip steps: torch alone (from the CPU index where preferred), then the rest. A run that fails
    halfway leaves no stamp, so running the same command again resumes (pip skips what is there)."""
    override = torch_override or os.environ.get("NORMLAB_TORCH", "auto") or "auto"
    if override not in TORCH_CHOICES:
        say(f"--torch 只接受 {' / '.join(TORCH_CHOICES)}，收到 {override!r}")
        sys.exit(2)
    if BASE_PYTHON == sys.executable and sys.version_info < (3, 11):
        say(f"需要 Python 3.11 或更新版本，当前是 {sys.version.split()[0]}。(Python 3.11+ is required.)")
        sys.exit(1)
    py = venv_bin("python")
    if not py.exists():
        say(f"创建虚拟环境 {VENV.relative_to(ROOT) if VENV.is_relative_to(ROOT) else VENV}/ "
            "(creating the virtual environment) ...")
        failed = create_venv(BASE_PYTHON, VENV)
        if failed:
            say(failed)
            sys.exit(1)
    have, have_torch = read_stamp()
    switch = override != "auto" and have_torch and torch_choice(override)[0] != have_torch
    if set(extras) <= have and not switch:
        drop_slow_imports(py)
        return py
    extras = tuple(sorted(set(extras) | have, key=TEST_EXTRAS.index))
    choice, why = torch_choice(override)
    torch_args, how = torch_pip_args(choice)
    say(f"{why}。{how}")
    say(f"安装依赖 (installing {torch_requirement()}, JupyterLab, ...)：大小和用时见 README「安装」一节 ...")
    t0 = time.time()
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check"]
    lock = ["-c", LOCK] if LOCK.exists() else []
    if not LOCK.exists():
        say(f"没有 Python {LOCK.stem.rsplit('py', 1)[-1]} 的测试版本表 ({LOCK.name})：按 pyproject.toml 的版本范围安装。")
    # 1. torch alone, so that the CPU index (when used) serves torch and its few dependencies only
    if switch:   # --torch cpu / default asked for the other build than the one installed
        run([py, "-m", "pip", "uninstall", "-y", "-q", "torch"])
    step1 = pip + torch_args + [torch_requirement()]
    code = run(step1 + lock)
    if code != 0 and lock:
        code = run(step1)
    # 2. normlab and everything else (torch is already there)
    base = pip + ["-e", f".[{','.join(extras)}]"]
    if code == 0 and lock:
        lock = ["-c", constraints_for(LOCK, torch_build(py))]
    if code == 0:
        code = run(base + lock) if lock else 1
        if code != 0 and lock:
            say(f"按测试过的精确版本 ({LOCK.name}) 安装失败，改用 pyproject.toml 的版本范围重试 ...")
        if code != 0:
            code = run(base)
    if code != 0:
        say("依赖安装失败，见上方 pip 的输出。再运行同一条命令会从中断处继续。"
            "(pip install failed, see above; running the same command again resumes.)")
        sys.exit(code)
    drop_slow_imports(py)
    configure_jupyter()
    build = torch_build(py)
    got = "cpu" if build.endswith("(CPU)") else "default"   # what was installed, fallback included
    STAMP.write_text(f"{wanted_stamp()}\n{','.join(extras)}\n{got}\n", encoding="utf-8")
    say(f"环境就绪 (environment ready) in {time.time() - t0:.0f} s · torch {build}")
    return py


def create_venv(python: str, where: Path, *options: str) -> str | None:
    """`python -m venv where`; None when it worked, else what went wrong, said from what venv printed:
    python3-venv missing (Debian/Ubuntu) only when that is what it says."""
    p = subprocess.run([python, "-m", "venv", *options, str(where)], capture_output=True, cwd=ROOT)
    if p.returncode == 0:
        return None
    utf8 = os.environ.get("PYTHONUTF8") == "1"
    said = (p.stdout + p.stderr).decode("utf-8" if utf8 else locale.getpreferredencoding(False), errors="replace")
    last = "\n".join(said.strip().splitlines()[-6:])
    if "No module named venv" in said or "ensurepip" in said and "not available" in said or \
            "No module named ensurepip" in said:
        return ("无法创建虚拟环境：这个 Python 没有 venv / ensurepip 模块，Debian/Ubuntu 上请安装 python3-venv"
                f"（sudo apt-get install python3-venv）。(venv or ensurepip is missing)\n{last}")
    if "surrogates not allowed" in said:
        return (f"无法创建虚拟环境：文件夹 {where} 的名字不是 UTF-8 编码的字节，而 Python 处在 UTF-8 模式 (PYTHONUTF8=1)："
                "名字里的字节变成了 UTF-8 文本文件（pyvenv.cfg）写不下的代理字符 (surrogates)。取消 PYTHONUTF8 再运行，"
                f"或把仓库放进名字是 UTF-8 或 ASCII 的文件夹。(the folder's name is not UTF-8 and UTF-8 mode is on)\n{last}")
    return f"无法创建虚拟环境 (python -m venv failed)，它的输出：\n{last}"


def configure_jupyter() -> None:
    """JupyterLab settings that live inside .venv: no news pop-up, no update check."""
    settings = VENV / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    overrides = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}
    (settings / "overrides.json").write_text(json.dumps(overrides, indent=2), encoding="utf-8")


CHROMIUM = Path("/usr/bin/chromium")


def ensure_browser() -> None:
    """Debian's Chromium and a CJK font for the real-browser tests (Playwright never downloads one).
    Installed with apt-get when running as root on Debian/Ubuntu (CI); otherwise those tests skip
    (where CI is set they fail instead). NORMLAB_NO_BROWSER=1 leaves the machine as it is (a shared
    development machine): they skip."""
    if CHROMIUM.exists() or not sys.platform.startswith("linux") or os.environ.get("NORMLAB_NO_BROWSER"):
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


def workspace_dir() -> Path:
    """workspace/ (the learner's copies), or NORMLAB_WORKSPACE (the tests use a temporary folder)."""
    return Path(os.environ["NORMLAB_WORKSPACE"]) if os.environ.get("NORMLAB_WORKSPACE") else ROOT / "workspace"


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def take_option(args: list[str], name: str, needs_value: bool) -> tuple[str | None, list[str]]:
    """Remove `--name VALUE` / `--name=VALUE` (or a bare `--name`) from args; return (value, rest).
    A bare `--name` that needs a value gives ""."""
    rest, value, i = [], None, 0
    while i < len(args):
        a = args[i]
        if a == name:
            if needs_value and i + 1 < len(args) and not args[i + 1].startswith("-"):
                value, i = args[i + 1], i + 2
                continue
            value = "" if needs_value else name
        elif a.startswith(name + "="):
            value = a.split("=", 1)[1]
        else:
            rest.append(a)
        i += 1
    return value, rest


def course_command(py: Path, *args: str | Path) -> int:
    """normlab.course (the installed package's own command, `normlab-course`) in the venv."""
    return run([py, "-m", "normlab.course", *args])


def reset_workspace(py: Path, workspace: Path, name: str | None, everything: bool) -> None:
    """Fresh copies of lesson `name` ("03", "03_layernorm"), or of all with `everything`, through
    `normlab-course reset`: each replaced copy moves to workspace/.backup/ first (nothing is deleted;
    other files are never touched). A name that is no lesson exits with 2 and changes nothing."""
    code = course_command(py, "reset", "--all", workspace) if everything else \
        course_command(py, "reset", name or "", workspace)
    if code != 0:
        sys.exit(code)


def cmd_course(args: list[str]) -> int:
    """Write the learner's workspace (normlab-course init: learner copies under the lessons' names,
    solutions/ beside them, normlab-source/) and open lesson 00 in JupyterLab."""
    name, args = take_option(args, "--reset", needs_value=True)
    everything, args = take_option(args, "--reset-all", needs_value=False)
    py = ensure_env()
    workspace = workspace_dir()
    if name is not None or everything:
        reset_workspace(py, workspace, name, bool(everything))
    if course_command(py, "init", workspace, "--solutions") != 0:
        sys.exit(1)
    say(f"打开 JupyterLab：{shown(workspace)}/{FIRST_NOTEBOOK}.ipynb（{shown(workspace)}/ 里是你自己的学习版副本，"
        f"可随意修改；答案版在 {shown(workspace)}/solutions/；python3 run.py course --reset 03 把第 03 课恢复原样）")
    # The URL JupyterLab prints (and opens) is its default_url: lesson 00, not the Launcher.
    cmd = [venv_bin("jupyter"), "lab", workspace / f"{FIRST_NOTEBOOK}.ipynb",
           f"--LabApp.default_url=/lab/tree/{FIRST_NOTEBOOK}.ipynb"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    shell, env = course_terminals(os.environ)
    cmd += shell + args
    # No OMP_WAIT_POLICY here: alone (a learner's usual case) the default is fastest (05: 23 s, against
    # 50 s with PASSIVE). Under contention spin-waits cost far more (60 steps of 01: 99 s vs 1.5 s), so
    # the lessons' small training loops run on one torch thread instead (normlab.train, threads=1).
    if IS_WINDOWS:
        return run(cmd, env=env)
    os.chdir(ROOT)
    os.execve(str(cmd[0]), [str(c) for c in cmd], env)  # JupyterLab takes over this process (Ctrl-C stops it)


def course_terminals(environ) -> tuple[list[str], dict[str, str]]:
    """JupyterLab's options and environment for terminals that run the course's Python: the venv's
    bin/ (Scripts\\ on Windows) first on PATH, so `python -m normlab.drills --help` works in a Terminal
    opened from the course's JupyterLab. The shell is named (jupyter_server_terminals otherwise starts a
    login shell when its output is no terminal, and a login shell's /etc/profile resets PATH); bash
    reads the learner's ~/.bashrc first and then puts the venv first again (a conda init line there
    would otherwise win)."""
    bindir = str(venv_bin("python").parent)
    env = dict(environ, PATH=bindir + os.pathsep + environ.get("PATH", ""), VIRTUAL_ENV=str(VENV))
    if IS_WINDOWS:
        return [], env
    shell = environ.get("SHELL") or shutil.which("sh") or "/bin/sh"
    argv = [shell]
    if Path(shell).name == "bash":
        rc = ROOT / "build" / "jupyter" / "terminal.bashrc"
        rc.parent.mkdir(parents=True, exist_ok=True)
        rc.write_text("# run.py course: the learner's own ~/.bashrc, then the course's environment first on PATH\n"
                      '[ -f ~/.bashrc ] && . ~/.bashrc\n'
                      f'export PATH={shlex.quote(bindir)}":$PATH"\n', encoding="utf-8")
        argv += ["--rcfile", str(rc)]
    return [f"--ServerApp.terminado_settings=shell_command={json.dumps(argv)}"], env


# Three pytest workers, on two cores too: with two, the CPU was busy 71% of the run (490 s of CPU in
# 345 s; a browser test waits for frames and pages, a kernel or a server for its start), and three ran
# the same tests in 298 s (2026-11-26, the course's 2-core machine). Each kernel keeps one thread.
TEST_WORKERS = 3


def cmd_test(args: list[str]) -> int:
    """pytest for normlab plus nbval over every notebook, TEST_WORKERS workers, one notebook per worker.

    Each notebook copy is executed once: nbval's run of a solution copy is also the book's and the
    slides' execution (tests/conftest.py registers tools/nbval_book.py, which saves it to build/executed/
    and orders the run: notebooks first, the tests that need the built book last, in the order given:
    --no-loadscope-reorder). After the run it prints the ten slowest items and the time per group."""
    py = ensure_env(TEST_EXTRAS)
    ensure_browser()
    t0 = time.time()
    nbdir = ROOT / "build" / "nbval"
    export_notebooks(py, nbdir, keep_existing=False)
    paths = [a for a in args if not a.startswith("-") and (ROOT / a.split("::")[0]).exists()]
    targets = [] if paths else ["tests", str(nbdir.relative_to(ROOT))]
    # Several notebooks run at once (the pytest workers, and the book build's two executors): one
    # thread each. Two OpenMP pools of two threads on two cores spin against each other and run
    # many times slower than one thread each.
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONHASHSEED="0", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               NORMLAB_DRILLS_FILE="off",   # test runs never write a learner's drill progress
               NORMLAB_PREDICT_WAIT="0")    # nor stop at a 先想一想 nobody answers (the lab tests' server does)
    # Bytecode caches (__pycache__/, ignored by git) even where PYTHONDONTWRITEBYTECODE is set: without
    # them each of the ~100 processes a run starts (kernels, command lines, servers) compiles normlab's
    # modules again, and every nested pytest rewrites its test modules' asserts again (issue 27).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = run([py, "-m", "pytest", *targets, "--nbval-lax", "--nbval-current-env",
                "--nbval-cell-timeout", "300", "-n", str(TEST_WORKERS), "--dist", "loadscope", "--no-loadscope-reorder",
                "-p", "no:cacheprovider", *args], env=env)
    say(f"测试用时 (test time): {time.time() - t0:.0f} s, exit code {code} · Python "
        f"{'.'.join(map(str, python_version(py)))} · torch {torch_build(py)} · venv {shown(VENV)}")
    return code


def python_version(py: Path) -> tuple[int, ...]:
    out = subprocess.run([str(py), "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True, encoding="utf-8")
    return tuple(int(v) for v in out.stdout.split())


def cmd_freeze(args: list[str]) -> int:
    """(maintainers) Record the exact versions in the venv after a passing test run, for its Python."""
    py = ensure_env(TEST_EXTRAS)
    out = subprocess.run([str(py), "-m", "pip", "freeze", "--exclude-editable"], capture_output=True, text=True,
                         check=True, encoding="utf-8").stdout
    pins = sorted(line.split("+")[0] for line in out.splitlines() if "==" in line)  # drop +cpu labels
    major, minor = python_version(py)
    header = ["# Exact versions of the last passing `python3 run.py test"
              f"{'' if (major, minor) == (3, 11) else f' --python {major}.{minor}'}` (Python {major}.{minor}, "
              f"Linux x86-64, torch {torch_build(py)}).",
              "# Used as pip constraints by run.py on this Python version. Regenerate with: python3 run.py freeze"
              f"{'' if (major, minor) == (3, 11) else f' --python {major}.{minor}'}"]
    LOCK.write_text("\n".join(header + pins) + "\n", encoding="utf-8")
    have, choice = read_stamp()
    STAMP.write_text(f"{wanted_stamp()}\n{','.join(sorted(have | set(TEST_EXTRAS), key=TEST_EXTRAS.index))}\n"
                     f"{choice}\n", encoding="utf-8")
    say(f"{len(pins)} versions -> {LOCK.name}")
    return 0


def cmd_sweep(args: list[str]) -> int:
    """(maintainers) Seeds 0-4 x torch threads {1, 2} over every notebook; writes normlab/records/."""
    return run([ensure_env(TEST_EXTRAS), ROOT / "tools" / "sweep.py", *args])


def cmd_book(args: list[str]) -> int:
    """Build the static book offline: build/book/html/index.html, the learners' book (the learner copies
    as run: stubs and their checks' output, no solution; each prompt's experiment shown after a guess);
    `--teacher`: build/book_teacher/html/, the solutions and the instructor guide. Executes only the
    notebooks not current in build/executed/ (after `run.py test`: none)."""
    py, t0 = ensure_env(), time.time()
    code = run([py, ROOT / "tools" / "book.py", "book", *args])
    say(f"网页版用时 (book build time): {time.time() - t0:.0f} s, exit code {code}")
    return code


def cmd_slides(args: list[str]) -> int:
    """Build reveal.js lecture slides for every notebook: build/slides/NN_name.slides.html (from
    build/executed/, like the book)."""
    py, t0 = ensure_env(), time.time()
    code = run([py, ROOT / "tools" / "book.py", "slides", *args])
    say(f"幻灯片用时 (slides build time): {time.time() - t0:.0f} s, exit code {code}")
    return code


def drills_prog(cwd: Path | None = None) -> str:
    """The command that starts the drill checker from where this one runs: `python3 run.py drills`
    (`py run.py drills` on Windows), with run.py's path when the shell is elsewhere."""
    cwd = Path.cwd() if cwd is None else cwd
    script = "run.py" if cwd.resolve() == ROOT else str(ROOT / "run.py")
    if " " in script:
        script = f'"{script}"'
    return f"{'py' if IS_WINDOWS else 'python3'} {script} drills"


def cmd_drills(args: list[str]) -> int:
    """The interview-drill checker (normlab.drills) in the venv, from a plain shell with nothing activated:
    `python3 run.py drills layernorm my_ln.py`, `--progress`, `--help`. FILE paths are read from the
    shell's own folder; what the checker prints as its command is this one (NORMLAB_DRILLS_PROG)."""
    py = ensure_env()
    env = dict(os.environ, NORMLAB_DRILLS_PROG=drills_prog())
    return subprocess.call([str(py), "-m", "normlab.drills", *args], env=env)


COMMANDS = {"course": cmd_course, "test": cmd_test, "book": cmd_book, "slides": cmd_slides, "drills": cmd_drills,
            "freeze": cmd_freeze, "sweep": cmd_sweep}


def utf8_mode_helps(paths: tuple[Path, ...] | None = None, windows: bool = IS_WINDOWS) -> bool:
    """Whether UTF-8 mode suits the course's paths: always on Windows (file names are Unicode there),
    on POSIX where the repository's and the shell's folders are named in UTF-8 (or ASCII) bytes. A folder
    named in the locale's own other encoding (GB18030 bytes under a zh_CN.GB18030 locale) would be
    decoded into surrogates in UTF-8 mode, which no UTF-8 text file (the venv's pyvenv.cfg) can hold;
    without UTF-8 mode Python reads it in the locale's encoding, correctly."""
    if windows:
        return True
    for path in (ROOT, Path.cwd()) if paths is None else paths:
        try:
            os.fsencode(path).decode("utf-8")
        except UnicodeDecodeError:
            return False
    return True


def utf8_everywhere() -> None:
    """UTF-8 whatever the learner's locale (a Simplified-Chinese Windows console is GBK / cp936), where
    it helps (utf8_mode_helps: not for a POSIX folder named in another encoding, where it is turned off).

    PYTHONUTF8=1 (PEP 540) is inherited by every child process this file starts: the venv's Python,
    pip, JupyterLab and through it every kernel, pytest and its xdist workers (execnet's bootstrap
    fails from a folder named in Chinese without it), the sweep and the book tools. In UTF-8 mode
    open() without an encoding, and stdin/stdout, are UTF-8 whatever the code page. Our own code
    names encoding="utf-8" anyway (tests/test_encoding.py); this covers third-party code too.
    Our own console: a character the console cannot show is replaced, never a crash."""
    os.environ["PYTHONUTF8"] = "1" if utf8_mode_helps() else "0"
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError):
            pass


def main(argv: list[str] = sys.argv[1:]) -> int:
    utf8_everywhere()
    if not argv or argv[0] not in COMMANDS:
        print(__doc__)
        return 2
    args = argv[1:]
    torch, args = take_option(args, "--torch", needs_value=True)
    if torch is not None:
        os.environ["NORMLAB_TORCH"] = torch   # read by ensure_env, and by run.py commands the tests start
    python, args = take_option(args, "--python", needs_value=True)
    if python:
        use_python(python)
    return COMMANDS[argv[0]](args)


if __name__ == "__main__":
    sys.exit(main())
