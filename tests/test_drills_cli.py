"""The drills' progress file, timed mode and command line (issues 18 and 28 items 6, 8, 9):
who records an attempt (the cards and the CLI, never a library call), timing an attempt written in
one's own editor (start / check, one progress format with the notebook's clock), --help naming what
each card's file must define, --progress counting notebook 08's cards with ✓ for the latest attempt,
and every path printing on a GBK console."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from normlab import drills
from normlab.drills import progress
from normlab.drills.__main__ import main

ROOT = Path(__file__).resolve().parent.parent
GOOD_LN = "from torch import nn\nLayerNorm = nn.LayerNorm\n"
BAD_LN = ("import torch\nfrom torch import nn\n"
          "class LayerNorm(nn.LayerNorm):            # torch.var's default: unbiased\n"
          "    def forward(self, x):\n"
          "        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + self.eps) "
          "* self.weight + self.bias\n")


@pytest.fixture(autouse=True)
def progress_file(tmp_path, monkeypatch):
    """Every test keeps its progress in its own temporary file (never ~/.normlab), no card opened, no clock."""
    path = tmp_path / "progress" / "drills.json"
    monkeypatch.setenv(progress.FILE_VARIABLE, str(path))
    monkeypatch.setattr(progress, "_started", {})
    monkeypatch.setattr(progress, "_opened", set())
    monkeypatch.setattr(progress, "_enabled", True)
    return path


class FakeClock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


class LNUnbiased(nn.LayerNorm):
    def forward(self, x):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + self.eps) * self.weight + self.bias


class BN(nn.BatchNorm2d):                    # torch's BatchNorm on (N, C) and (N, C, H, W)
    def _check_input_dim(self, x):
        pass


class BNGradMode(BN):                        # d2l's mode switch: from autograd, not self.training
    def forward(self, x):
        self.training = torch.is_grad_enabled()
        return super().forward(x)


def prenorm(x, f, n):
    return x + f(n(x))


def postnorm(x, f, n):
    return n(x + f(x))


def rows_of(out: str) -> dict[str, list[str]]:
    """--progress's rows by card name (and "  kind" for a card's kinds)."""
    rows = {}
    for line in out.splitlines():
        if line[:1] in progress.NUMBERS:
            rows[line.split()[1]] = re.split(r"\s{2,}", line.split(None, 2)[2].strip())
        elif line.startswith("   ") and line.split()[0] in drills.KINDS:
            rows["  " + line.split()[0]] = re.split(r"\s{2,}", line.strip())[1:]
    return rows


# ---------------------------------------------------------------- item 9: who records an attempt
def test_a_library_check_writes_no_progress(progress_file):
    """drills.check from a script, test or tool writes nothing; record=True, a card opened with
    drills.start, and the CLI do (the control: the same check with the opt-in writes the file)."""
    drills.check("layernorm", nn.LayerNorm)
    drills.check("batchnorm", BNGradMode, level="production")
    assert not progress_file.exists()
    drills.check("layernorm", nn.LayerNorm, record=True)                       # the explicit opt-in
    assert progress.load(progress_file)["kinds"]["layernorm"]["attempts"] == 1
    drills.start("rmsnorm")                                                    # a notebook card opened
    drills.check("rmsnorm", nn.RMSNorm)
    drills.check("rmsnorm", nn.RMSNorm, record=False)                          # ... unless the caller says no
    drills.check("batchnorm", BN)                                              # another card: not opened
    kinds = progress.load(progress_file)["kinds"]
    assert set(kinds) == {"layernorm", "rmsnorm"} and kinds["rmsnorm"]["attempts"] == 1
    drills.record_progress(False)                                              # the answer version of 08
    drills.check("layernorm", nn.LayerNorm, record=True)
    assert progress.load(progress_file)["kinds"]["layernorm"]["attempts"] == 1


def test_a_script_leaves_the_default_progress_file_alone(tmp_path):
    """In a fresh process with the default file (~/.normlab/drills.json): a script's check writes nothing,
    then the command line's check of the same answer writes it (the control)."""
    env = {k: v for k, v in os.environ.items() if k != progress.FILE_VARIABLE}
    env.update(HOME=str(tmp_path), USERPROFILE=str(tmp_path), OMP_NUM_THREADS="1", PYTHONUTF8="1")
    answer = tmp_path / "my_ln.py"
    answer.write_text(GOOD_LN, encoding="utf-8")
    default = tmp_path / ".normlab" / "drills.json"
    script = ("from pathlib import Path\nfrom torch import nn\nfrom normlab import drills\n"
              "from normlab.drills.__main__ import main\n"
              "assert drills.check('layernorm', nn.LayerNorm).passed\n"
              f"print('after the script:', Path({str(default)!r}).exists())\n"
              f"print('rc', main(['layernorm', {str(answer)!r}]))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, encoding="utf-8", env=env,
                       cwd=ROOT, timeout=120)
    assert "after the script: False" in r.stdout and "rc 0" in r.stdout, r.stdout + r.stderr
    assert json.loads(default.read_text(encoding="utf-8"))["kinds"]["layernorm"]["attempts"] == 1


# ---------------------------------------------------------------- timed mode (issue 18), in the notebook
def test_timed_mode_records_the_real_elapsed_time(monkeypatch, progress_file, capsys):
    """The clock runs from start() to the first passing check: a failed check shows the time so far,
    the passing one stops the clock and is saved as the best time; a later check is not timed."""
    clock = FakeClock()
    monkeypatch.setattr(progress, "clock", clock)
    drills.start("layernorm")
    assert "5:00" in capsys.readouterr().out                         # the target, said when the card is opened
    clock.t += 187
    bad = drills.check("layernorm", LNUnbiased)
    assert bad.elapsed == 187 and bad.clock_running and bad.target == 300
    assert "用时 (time) 3:07 / 目标 (target) 5:00" in str(bad) and "计时继续" in str(bad)
    clock.t += 60
    good = drills.check("layernorm", nn.LayerNorm)
    assert good.elapsed == 247 and not good.clock_running
    assert "用时 (time) 4:07 / 目标 (target) 5:00（在目标内" in str(good)
    assert "4:07" in good._repr_html_() and "5:00" in good._repr_html_()
    clock.t += 999
    again = drills.check("layernorm", nn.LayerNorm)                  # the clock stopped at the pass
    assert again.elapsed is None and "用时" not in str(again)
    entry = progress.load(progress_file)["kinds"]["layernorm"]
    assert entry["attempts"] == 3 and entry["best_seconds"] == 247 and entry["interview"] and entry["production"]


def test_a_card_with_several_kinds_starts_them_all(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(progress, "clock", clock)
    drills.start("blocks")
    clock.t += 200
    pre = drills.check("prenorm_block", prenorm)
    clock.t += 5
    post = drills.check("postnorm_block", postnorm)
    assert (pre.elapsed, post.elapsed) == (200, 205)
    assert "超出目标 over target by 0:20" in str(pre)                  # target 3:00
    for card, (_, kinds, target) in drills.CARDS.items():              # every card can be timed
        drills.start(card)
        assert set(kinds) <= set(progress._started) and all(drills.TARGETS[k] == target for k in kinds)
    assert set(drills.TARGETS) == set(drills.KINDS) == set(drills.DEFINES) == set(drills.NAMES)
    assert drills.TARGETS["layernorm"] == 300 and drills.TARGETS["batchnorm"] == 600
    assert drills.TARGETS["layernorm_backward"] == 900
    with pytest.raises(ValueError, match="unknown drill card"):
        drills.start("layer_norm")


# ---------------------------------------------------------------- item 6: timing an attempt in one's own editor
def test_start_and_check_on_the_command_line_time_an_attempt(monkeypatch, progress_file, tmp_path, capsys):
    """`start layernorm` writes the start into the progress file and says what to write and where;
    `check layernorm FILE` (another process: only the file's clock) reads it; the first pass stops it
    and saves the best time in the same entry format as the notebook's timed mode."""
    wall = FakeClock(1_700_000_000.0)
    monkeypatch.setattr(progress, "wall", wall)
    monkeypatch.chdir(tmp_path)
    assert main(["start", "layernorm"]) == 0
    out = capsys.readouterr().out
    assert "class LayerNorm(normalized_shape, eps=1e-5)" in out and "self.weight" in out
    assert str(tmp_path / "my_layernorm.py") in out and "check layernorm my_layernorm.py" in out
    assert str(progress_file) in out and "5:00" in out
    assert progress.load(progress_file)["kinds"]["layernorm"]["started"] == 1_700_000_000.0
    Path("my_layernorm.py").write_text(BAD_LN, encoding="utf-8")
    wall.t += 200
    assert main(["check", "layernorm", "my_layernorm.py"]) == 1
    out = capsys.readouterr().out
    assert "用时 (time) 3:20 / 目标 (target) 5:00" in out and "计时继续" in out and "unbiased_variance" in out
    wall.t += 40
    Path("my_layernorm.py").write_text(GOOD_LN, encoding="utf-8")
    assert main(["layernorm", "my_layernorm.py"]) == 0                 # the short form is the same check
    assert "用时 (time) 4:00 / 目标 (target) 5:00（在目标内" in capsys.readouterr().out
    entry = progress.load(progress_file)["kinds"]["layernorm"]
    assert entry["attempts"] == 2 and entry["best_seconds"] == 240 and "started" not in entry
    wall.t += 500
    assert main(["check", "1", "my_layernorm.py"]) == 0                # stopped: a later check is not timed
    assert "用时" not in capsys.readouterr().out
    # the notebook's clock writes the same entry (one format): same keys, same meaning
    monkeypatch.setattr(progress, "clock", FakeClock())
    drills.start("rmsnorm")
    progress.clock.t += 30
    drills.check("rmsnorm", nn.RMSNorm)
    kinds = progress.load(progress_file)["kinds"]
    assert set(kinds["rmsnorm"]) == set(kinds["layernorm"]) and kinds["rmsnorm"]["best_seconds"] == 30


def test_a_card_of_several_kinds_is_checked_from_one_file(monkeypatch, tmp_path, capsys):
    wall = FakeClock(1_700_000_000.0)
    monkeypatch.setattr(progress, "wall", wall)
    answer = tmp_path / "my_blocks.py"
    answer.write_text("def prenorm_block(x, sublayer, norm):\n    return x + sublayer(norm(x))\n\n"
                      "def postnorm_block(x, sublayer, norm):\n    return x + norm(sublayer(x))\n", encoding="utf-8")
    assert main(["start", "blocks"]) == 0
    out = capsys.readouterr().out
    assert "def prenorm_block(x, sublayer, norm)" in out and "def postnorm_block(x, sublayer, norm)" in out
    wall.t += 100
    assert main(["check", "blocks", str(answer)]) == 1                 # post-norm wrong: the card is not passed
    out = capsys.readouterr().out
    assert "[prenorm_block] 通过 PASSED" in out and "[postnorm_block] 未通过 FAILED" in out
    rows = rows_of(progress.table())
    assert rows["blocks"][0] == "2" and rows["blocks"][3] == "✗"
    assert rows["  prenorm_block"] == ["1", "1:40", "✓", "—"] and rows["  postnorm_block"] == ["1", "—", "✗", "—"]


def test_command_line_errors_are_said_not_raised(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("def LayerNorm(:\n", encoding="utf-8")
    other = tmp_path / "other.py"
    other.write_text("x = 1\n", encoding="utf-8")
    assert main(["check", "layer_norm", str(other)]) == 2 and "unknown drill card" in capsys.readouterr().err
    assert main(["check", "layernorm", str(tmp_path / "none.py")]) == 2 and "file not found" in capsys.readouterr().err
    assert main(["layernorm", str(broken)]) == 2 and "your file failed to import" in capsys.readouterr().err
    assert main(["dyt", str(other)]) == 2
    err = capsys.readouterr().err
    assert "没有找到 DyT" in err and "class DyT(d, alpha_init=0.5)" in err       # the name and its signature
    assert main(["start"]) == 2 and main(["start", "nope"]) == 2 and main([]) == 2
    assert main(["--reset"]) == 2


# ---------------------------------------------------------------- item 8: --help and --progress
def _notebook_text() -> str:
    return (ROOT / "notebooks" / "08_drills.md").read_text(encoding="utf-8")


def test_help_says_what_each_file_defines_where_progress_is_and_how_to_reset(progress_file, capsys):
    """--help names, per card, what the file must define: the signatures notebook 08's cards state
    (the notebook is the reference), the required attribute names, the progress file and --reset."""
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    text = _notebook_text()
    for card, (number, kinds, _) in drills.CARDS.items():
        assert f"{number} {card}" in out
        for kind in kinds:
            name, signature, needs = drills.DEFINES[kind]
            bare = signature.split(" ", 1)[1]                          # without "class " / "def "
            assert bare in out and bare.startswith(name + "(") and bare in text, (kind, bare)
            for attr in re.findall(r"self\.\w+", needs):
                assert attr in out and attr in text, (kind, attr)
    assert str(progress_file) in out and progress.FILE_VARIABLE in out
    assert "--reset layernorm" in out and "--reset all" in out
    assert main(["-h"]) == 0 and capsys.readouterr().out == out
    for answer in ("sublayer(norm(x))", "norm(x + sublayer", "无偏", "unbiased", "(2N)", "tanh", "register_buffer"):
        assert answer not in out, answer                               # what to define, never how (the cards' hints)


def test_progress_counts_the_cards_the_lesson_shows(monkeypatch, capsys):
    """--progress has one row per card of notebook 08, in its order, and counts cards, not kinds."""
    headings = re.findall(rf"^## ([{progress.NUMBERS}])", _notebook_text(), flags=re.M)
    assert headings == [number for number, _, _ in drills.CARDS.values()]       # the lesson's cards are CARDS
    clock = FakeClock()
    monkeypatch.setattr(progress, "clock", clock)
    drills.start("rmsnorm")
    clock.t += 125
    drills.check("rmsnorm", nn.RMSNorm)
    drills.check("batchnorm", BNGradMode, record=True)
    drills.check("prenorm_block", prenorm, record=True)
    capsys.readouterr()
    assert main(["--progress"]) == 0
    out = capsys.readouterr().out
    rows = rows_of(out)
    assert [k for k in rows if not k.startswith(" ")] == list(drills.CARDS)
    assert rows["rmsnorm"] == ["1", "2:05", "4:00", "✓", "✓"]
    assert rows["batchnorm"] == ["1", "—", "10:00", "✗", "✗"]
    assert rows["blocks"] == ["1", "—", "3:00", "✗", "—"]                       # post-norm not done yet
    assert rows["  prenorm_block"] == ["1", "—", "✓", "—"] and rows["  postnorm_block"] == ["0", "—", "·", "—"]
    assert rows["layernorm"] == ["0", "—", "5:00", "·", "·"]
    assert f"面试级通过 1/{len(drills.CARDS)} 张卡片" in out and "/12" not in out


def test_a_tick_means_the_latest_attempt_passed(capsys):
    """✓ is the latest attempt; a card passed before and failed now says so ("✗ 曾通过", passed once)."""
    drills.check("batchnorm", BN, record=True)
    assert rows_of(progress.table())["batchnorm"][3] == "✓"
    drills.check("batchnorm", BNGradMode, record=True)
    rows = rows_of(progress.table())
    assert rows["batchnorm"][3] == "✗ 曾通过" and "passed once" in progress.table()
    assert progress.cards_passed(progress.load()) == 0
    drills.check("batchnorm", BN, record=True)
    assert rows_of(progress.table())["batchnorm"][3] == "✓" and progress.cards_passed(progress.load()) == 1


# ---------------------------------------------------------------- the progress file (issue 18)
def test_progress_file_round_trip(progress_file):
    assert progress.load(progress_file) == progress.empty()            # no file yet: empty progress
    drills.check("batchnorm", BN, record=True)
    drills.check("batchnorm", BNGradMode, record=True)
    drills.check("prenorm_block", prenorm, record=True)
    data = json.loads(progress_file.read_text(encoding="utf-8"))
    assert data["format"] == progress.FORMAT
    bn = data["kinds"]["batchnorm"]
    assert bn["attempts"] == 2 and bn["interview"] is True and bn["best_seconds"] is None   # untimed
    assert bn["latest_interview"] is False                                                  # the latest failed
    assert data["kinds"]["prenorm_block"]["attempts"] == 1
    assert progress.load(progress_file) == data
    assert not list(progress_file.parent.glob("*.tmp"))                  # written atomically


def test_blank_cards_and_the_answer_version_are_not_attempts(progress_file, monkeypatch):
    """The learner version's blank (tools/notebooks.py BLANK) is no attempt, and the answer version
    switches the file off: running 08 in the tests or the book leaves the learner's progress alone."""
    sys.path.insert(0, str(ROOT / "tools"))
    import notebooks as nbtools

    assert progress.BLANK_MARK in nbtools.BLANK
    blank = nbtools.BLANK.replace("raise ", "")

    class Blank(nn.Module):
        def __init__(self, normalized_shape, eps=1e-5):
            super().__init__()
            raise eval(blank)

    report = drills.check("layernorm", Blank, record=True)
    assert not report.passed and progress.is_blank(report) and not progress_file.exists()
    drills.record_progress(False)
    drills.check("layernorm", nn.LayerNorm, record=True)
    assert not progress_file.exists()
    drills.record_progress(True)
    monkeypatch.setenv(progress.FILE_VARIABLE, "")                      # empty: no file at all
    assert progress.progress_file() is None
    drills.check("layernorm", nn.LayerNorm, record=True)
    assert not progress_file.exists()
    assert main(["start", "layernorm"]) == 2                            # no file to keep a command-line clock in


def test_default_progress_file_is_in_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(progress.FILE_VARIABLE)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert progress.progress_file() == tmp_path / ".normlab" / "drills.json"


def test_a_bad_progress_file_costs_a_warning_never_the_report(progress_file, tmp_path, monkeypatch):
    progress_file.parent.mkdir(parents=True)
    progress_file.write_text("{ not json", encoding="utf-8")
    with pytest.warns(UserWarning, match="unreadable progress file"):
        drills.check("layernorm", nn.LayerNorm, record=True)
    assert progress_file.with_name("drills.json.bad").read_text(encoding="utf-8") == "{ not json"      # kept, moved aside
    assert progress.load(progress_file)["kinds"]["layernorm"]["attempts"] == 1
    blocker = tmp_path / "a_file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv(progress.FILE_VARIABLE, str(blocker / "drills.json"))          # cannot be created
    with pytest.warns(UserWarning, match="progress not saved"):
        report = drills.check("layernorm", nn.LayerNorm, record=True)
    assert report.passed


def test_reset_forgets_one_card_and_never_touches_answers(progress_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)   # as on a learner's machine: a check writes no __pycache__ there
    answers = tmp_path / "answers"                         # a learner's answer files and notebook copy
    answers.mkdir()
    (answers / "my_ln.py").write_text(GOOD_LN, encoding="utf-8")
    (answers / "08_drills_learner.ipynb").write_text('{"cells": ["MY DRILL ANSWER"]}', encoding="utf-8")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in answers.iterdir()}
    assert main(["layernorm", str(answers / "my_ln.py")]) == 0            # an attempt from the command line
    for kind, impl in [("batchnorm", BN), ("prenorm_block", prenorm), ("postnorm_block", postnorm)]:
        drills.check(kind, impl, record=True)
    assert set(progress.load(progress_file)["kinds"]) == {"layernorm", "batchnorm", "prenorm_block", "postnorm_block"}
    capsys.readouterr()
    assert main(["--reset", "layernorm"]) == 0
    assert "layernorm" in capsys.readouterr().out
    assert set(progress.load(progress_file)["kinds"]) == {"batchnorm", "prenorm_block", "postnorm_block"}
    assert main(["--reset=7"]) == 0                                      # a card by its number: both blocks
    assert set(progress.load(progress_file)["kinds"]) == {"batchnorm"}
    assert main(["--reset", "layernorm"]) == 0 and "没有记录" in capsys.readouterr().out
    assert main(["--reset", "no_such_card"]) == 2 and main(["--reset"]) == 2
    assert set(progress.load(progress_file)["kinds"]) == {"batchnorm"}
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in answers.iterdir()} == before
    assert sorted(p.name for p in progress_file.parent.iterdir()) == ["drills.json"]
    assert main(["--reset", "all"]) == 0 and progress.load(progress_file)["kinds"] == {}
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in answers.iterdir()} == before


# ---------------------------------------------------------------- every path on a GBK console
def test_every_command_prints_on_a_gbk_console(tmp_path):
    """A Simplified-Chinese Windows console (GBK has no ✓/✗/⏱): each command runs to its exit status,
    shows [OK]/[X] for ✓/✗, and writes nothing but GBK; the control: the same report in UTF-8 has ✓/✗."""
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(GOOD_LN, encoding="utf-8")
    bad.write_text(BAD_LN, encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONIOENCODING="gbk", PYTHONUTF8="0",
               **{progress.FILE_VARIABLE: str(tmp_path / "drills.json")})
    runs = {"start": (["start", "layernorm"], 0), "bad": (["check", "layernorm", str(bad)], 1),
            "good": (["layernorm", str(good)], 0), "progress": (["--progress"], 0), "help": (["--help"], 0),
            "usage": (["check", "nope", str(good)], 2), "reset": (["--reset", "all"], 0)}
    script = ("import sys\nfrom normlab.drills.__main__ import main\n"
              "for name, argv in " + repr({k: v[0] for k, v in runs.items()}) + ".items():\n"
              "    print('=== ' + name, flush=True); sys.stderr.write('=== ' + name + '\\n'); sys.stderr.flush()\n"
              "    print('rc', main(argv), flush=True)\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, env=env, cwd=ROOT, timeout=180)
    out, err = r.stdout.decode("gbk"), r.stderr.decode("gbk")            # GBK throughout: decodes strictly
    assert r.returncode == 0 and "Traceback" not in err, err
    parts = dict(re.findall(r"=== (\w+)\n(.*?)(?=\n=== |\Z)", out, flags=re.S))
    for name, (_, rc) in runs.items():
        assert parts[name].rstrip().endswith(f"rc {rc}"), (name, parts[name])
    assert "[X]" in parts["bad"] and "unbiased_variance" in parts["bad"] and "[OK]" in parts["good"]
    assert "[time]" in parts["start"] and "class LayerNorm(normalized_shape, eps=1e-5)" in parts["start"]
    assert "[OK]" in parts["progress"] and "[X]" in parts["progress"] and "LayerNorm(normalized_shape" in parts["help"]
    assert "unknown drill card" in err
    assert not any(ch in out for ch in "✓✗⏱")
    utf8 = subprocess.run([sys.executable, "-m", "normlab.drills", "layernorm", str(bad)], capture_output=True,
                          env=dict(env, PYTHONIOENCODING="utf-8"), cwd=ROOT, timeout=120)
    assert "✗" in utf8.stdout.decode("utf-8") and "[X]" not in utf8.stdout.decode("utf-8")


def test_the_notebook_start_prints_on_a_gbk_console_too(monkeypatch):
    """drills.start in a plain Python on a GBK console (print of ⏱ would raise UnicodeEncodeError)."""
    import io

    buffer = io.BytesIO()
    stream = io.TextIOWrapper(buffer, encoding="gbk", errors="strict")
    monkeypatch.setattr(sys, "stdout", stream)
    drills.start("layernorm")
    stream.flush()
    assert "[time]" in buffer.getvalue().decode("gbk") and "5:00" in buffer.getvalue().decode("gbk")
