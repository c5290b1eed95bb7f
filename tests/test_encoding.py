"""No text I/O in our code depends on the learner's locale.

On Simplified-Chinese Windows Python's default text encoding is the ANSI code page cp936 (GBK):
an ``open()`` or ``read_text()`` without ``encoding=`` decodes our UTF-8 files as GBK and fails on
the first Chinese character (``run.py`` reading pyproject.toml did, before any course started).
So every text read or write in ``run.py``, ``normlab/``, ``tools/`` and ``tests/`` names its
encoding, checked here with ``ast`` (nothing is imported or run):

* ``open(...)`` / ``Path.open(...)`` / ``io.open(...)`` in a text mode,
* ``Path.read_text()`` / ``Path.write_text(...)``,
* ``subprocess.run/check_output/Popen/call/check_call(..., text=True)`` (or ``universal_newlines``).

Binary modes, ``gzip.open``/``tarfile.open``/``webbrowser.open`` and calls that pass ``**kwargs``
are not text I/O of ours. The lint is a plain function, so the tests below plant each mistake.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUBPROCESS_TEXT = {"run", "check_output", "Popen", "call", "check_call"}
NOT_TEXT_OPENERS = {"gzip", "bz2", "lzma", "tarfile", "zipfile", "webbrowser", "os", "tempfile", "Image"}


def _kw(node: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in node.keywords if k.arg == name), None)


def _binary_mode(node: ast.Call, position: int) -> bool:
    mode = _kw(node, "mode")
    value = mode.value if mode else (node.args[position] if len(node.args) > position else None)
    return isinstance(value, ast.Constant) and isinstance(value.value, str) and "b" in value.value


def encoding_problems(source: str, name: str = "<source>") -> list[str]:
    """'file:line: what' for each text read/write in `source` that does not name its encoding."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        attr = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        named = _kw(node, "encoding") is not None or any(k.arg is None for k in node.keywords)  # **kw passes it on
        what = None
        if attr == "open" and isinstance(f, ast.Name):
            if not named and not _binary_mode(node, 1) and len(node.args) < 4:
                what = "open() without encoding="
        elif attr == "open" and isinstance(f, ast.Attribute):
            base = f.value.id if isinstance(f.value, ast.Name) else None
            position = 1 if base in ("io", "codecs") else 0      # io.open(file, mode) vs Path.open(mode)
            if base not in NOT_TEXT_OPENERS and not named and not _binary_mode(node, position):
                what = f"{ast.unparse(f)}() without encoding="
        elif attr in ("read_text", "write_text") and isinstance(f, ast.Attribute):
            if not named and len(node.args) <= (0 if attr == "read_text" else 1):
                what = f".{attr}() without encoding="
        elif (attr in SUBPROCESS_TEXT and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
              and f.value.id == "subprocess"):
            text = _kw(node, "text") or _kw(node, "universal_newlines")
            is_text = text is not None and not (isinstance(text.value, ast.Constant) and not text.value.value)
            if is_text and not named:
                what = f"subprocess.{attr}(text=True) without encoding="
        if what:
            out.append(f"{name}:{node.lineno}: {what}")
    return out


def our_python_files() -> list[Path]:
    files = [ROOT / "run.py"]
    for folder in ("normlab", "tools", "tests"):
        files += sorted((ROOT / folder).rglob("*.py"))
    return [f for f in files if "drill_corpus" not in f.parts]   # the corpus is candidates' code, not ours


def test_every_text_read_and_write_names_its_encoding():
    problems = []
    for path in our_python_files():
        problems += encoding_problems(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not problems, ("这些文本读写没有写 encoding=（在 GBK 的 Windows 上会出错）"
                          "(text I/O without an explicit encoding):\n" + "\n".join(problems))


def test_the_lint_covers_run_py_normlab_tools_and_tests():
    names = {p.relative_to(ROOT).parts[0] for p in our_python_files()}
    assert names == {"run.py", "normlab", "tools", "tests"}


@pytest.mark.parametrize("bad", [
    'Path("pyproject.toml").read_text()',
    'p.write_text("中文")',
    'open("x.json")',
    'open("x.json", "w")',
    'p.open("a")',
    'io.open("x", "r")',
    'subprocess.run(["x"], capture_output=True, text=True)',
    'subprocess.check_output(["x"], universal_newlines=True)',
    'json.load(open("x.json"))',
])
def test_lint_finds_a_planted_text_io_without_encoding(bad):
    assert encoding_problems(f"import io, json, subprocess\n{bad}\n"), bad


@pytest.mark.parametrize("good", [
    'Path("pyproject.toml").read_text(encoding="utf-8")',
    'p.write_text("中文", encoding="utf-8")',
    'p.write_text("x", "utf-8")',
    'open("x.bin", "rb")',
    'open("x", mode="wb")',
    'p.open("rb")',
    'gzip.open("x.gz")',
    'webbrowser.open("file:///x")',
    'subprocess.run(["x"], capture_output=True)',
    'subprocess.run(["x"], text=True, encoding="utf-8")',
    'subprocess.run(["x"], text=False)',
    'open("x", **kwargs)',
])
def test_lint_accepts_binary_and_explicit_encodings(good):
    assert not encoding_problems(textwrap.dedent(f"import gzip, subprocess, webbrowser\n{good}\n")), good


def test_removing_one_encoding_from_run_py_is_caught():
    """The check the issue asks for: take the encoding off run.py's pyproject read; the lint fires."""
    source = (ROOT / "run.py").read_text(encoding="utf-8")
    needle = '(ROOT / "pyproject.toml").read_text(encoding="utf-8")'
    assert needle in source
    broken = source.replace(needle, '(ROOT / "pyproject.toml").read_text()', 1)
    assert any("read_text() without encoding=" in p for p in encoding_problems(broken, "run.py"))
