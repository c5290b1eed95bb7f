"""Checked claims on measured numbers, and the record the seed x thread sweep keeps of them.

A fixed seed does not fix a trained number across thread counts, CPUs and BLAS builds (01's
300-step run: test accuracy 0.968 with 2 torch threads, 0.925 with 1). So a notebook never writes a
bare ``assert`` on a measurement; it writes

    from normlab.record import expect, measure
    expect("lr3e-3.residual_acc", acc, ">", 0.88)     # checked now, and recorded by the sweep
    expect("fit_slope", slope, "between", (-0.65, -0.35))
    expect("ln_bitwise_diff", diff, "==", 0.0)         # an identity: must hold exactly, every run
    expect("only_weight", names == ["weight"], "==", True)
    measure("warmup.post.steps_to_0.5", steps)          # a number the prose quotes, recorded only

A check that backs a *causal* claim ("BN lets the net train at this learning rate") says what the
cause is and gives the same measurement with the cause removed (the counterfactual): the check must
hold, and must *fail* without its cause, or it is no evidence for the claim (an identity holds
whatever the cause):

    expect("lr1.bn_acc", acc_bn, ">", 0.8, because="BatchNorm", without=acc_identity)

Both numbers are recorded; ``tests/test_record.py`` fails if a causal check has no recorded
counterfactual or if its counterfactual would pass in any run (with the same margin rule).

``python3 run.py sweep`` executes every notebook for seeds 0-4 x torch threads {1, 2} with the
environment variable ``NORMLAB_RECORD`` naming a file: every call appends one JSON line there. The
sweep keeps what it saw in ``normlab/records/NN_name.json``; ``tests/test_record.py`` checks every
threshold against the whole observed range with a margin (the rule: ``margin_problem`` below and
``notebooks/README.md``), that the record is not stale, and that every number the prose quotes
beside a ``<!--rec KEY FORM-->`` marker holds for every recorded run.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import operator
import os
import tokenize
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any

RECORD_VARIABLE = "NORMLAB_RECORD"
# Set by the sweep only: a failed check is recorded (``"held": false``) and printed, and the notebook goes on, so
# every value a run records is a measurement that no threshold decided (a changed threshold keeps it valid).
RECORD_ONLY_VARIABLE = "NORMLAB_RECORD_ONLY"
OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq}
# The margin rule: a threshold must lie beyond every value the sweep observed, by at least
# SPREAD_SHARE of the observed spread and RELATIVE_GAP of the nearest observed value's size.
SPREAD_SHARE, RELATIVE_GAP = 0.25, 0.03

__all__ = ["expect", "measure", "recorded", "margin_problem", "counterfactual_problem", "code_fingerprint",
           "cell_fingerprints", "ranges", "seed_values", "seed_count", "marker_problem"]
# The recorded key of a causal check's counterfactual: "<key>.without".
WITHOUT = ".without"


def _as_number(key: str, value: Any) -> float:
    if hasattr(value, "item"):                      # a 0-d tensor or numpy scalar
        value = value.item()
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"expect/measure 的值应是一个数 (a number) 或 True/False；{key!r} 收到 {type(value).__name__}。"
                        f"(the value of {key!r} must be a number or a bool)") from None


def _write(entry: dict) -> None:
    path = os.environ.get(RECORD_VARIABLE)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def _holds(value: float, op: str, threshold: Any) -> bool:
    if op == "between":
        lo, hi = threshold
        return lo < value < hi
    return bool(OPS[op](value, float(threshold)))


def expect(key: str, value: Any, op: str, threshold: Any, *, because: str | None = None,
           without: Any = None) -> None:
    """``assert value OP threshold``, recorded under ``key`` when the sweep runs. Returns None, so a
    cell that ends with it shows nothing extra (a returned float would print as the cell's result).

    OP is one of > >= < <= == (== for an identity that must hold exactly) or "between" with
    threshold (lo, hi), meaning lo < value < hi.

    A causal check names its cause (``because=``, in words) and passes ``without=``: the same
    measurement with that cause removed (BN replaced by the identity, the residual or the warm-up
    removed, ...). The check must then fail: if it would pass without its cause it proves nothing
    about the cause, and this call says so."""
    if op not in OPS and op != "between":
        raise ValueError(f"expect 的比较符 op 应为 {[*OPS, 'between']} 之一，实际是 {op!r}。(unknown op {op!r})")
    if op == "between" and not (isinstance(threshold, Sequence) and len(threshold) == 2):
        raise ValueError(f"op='between' 需要 threshold=(lo, hi)，实际是 {threshold!r}。(between needs (lo, hi))")
    if (because is None) != (without is None):
        raise ValueError(f"{key!r}：因果检查要同时给出原因 because= 和去掉原因后的同一测量 without=（反事实）。"
                         "(a causal check needs both because= and without=, the counterfactual)")
    v = _as_number(key, value)
    limit = list(threshold) if op == "between" else _as_number(key, threshold)
    entry = {"key": key, "value": v, "op": op, "threshold": limit}
    failure = None
    if not _holds(v, op, limit):
        failure = (f"断言不成立 (claim failed): {key} = {v:.6g}，应满足 {op} {limit}。"
                   f"(expected {key} {op} {limit}, got {v:.6g})")
    if because is not None:
        entry["because"] = str(because)
        w = _as_number(key + WITHOUT, without)
        if failure is None and _holds(w, op, limit):
            failure = (f"这个检查去掉原因（{because}）后仍然成立：{key} 的反事实 = {w:.6g} 也满足 {op} {limit}，"
                       "所以它不能证明这个原因。(the check also passes without its cause: it is no evidence "
                       f"for it; without {because}: {w:.6g} {op} {limit})")
        _write({**entry, "held": failure is None})
        _write({"key": key + WITHOUT, "value": w, "op": None, "threshold": None, "counterfactual_of": key})
    else:
        _write({**entry, "held": failure is None})
    if failure is not None:
        if os.environ.get(RECORD_ONLY_VARIABLE) and os.environ.get(RECORD_VARIABLE):
            print(failure)                      # the sweep: recorded as held=false; the run goes on
            return
        raise AssertionError(failure)


def measure(key: str, value: Any) -> None:
    """Record a measured number that the prose quotes (no check here; tests/test_record.py checks
    the prose's ``<!--rec KEY FORM-->`` marker against every recorded run). Returns None, as expect()."""
    v = _as_number(key, value)
    _write({"key": key, "value": v, "op": None, "threshold": None})


def margin_problem(op: str, threshold: Any, values: Iterable[float]) -> str | None:
    """None when ``threshold`` sits beyond all observed ``values`` with the margin, else why not.

    Rule: gap from the threshold to the nearest observed value >= max(SPREAD_SHARE x spread,
    RELATIVE_GAP x |nearest value|), and > 0. For "==" every value must equal the threshold."""
    vals = [float(v) for v in values]
    if not vals:
        return "no recorded value"
    if any(math.isnan(v) for v in vals):
        return "NaN recorded"
    lo, hi = min(vals), max(vals)
    spread = hi - lo
    if op == "==":
        return None if all(v == float(threshold) for v in vals) else f"values {lo:.6g}..{hi:.6g} != {threshold}"

    def gap_problem(nearest: float, gap: float, side: str) -> str | None:
        need = max(SPREAD_SHARE * spread, RELATIVE_GAP * abs(nearest))
        if gap > 0 and gap >= need:
            return None
        return (f"{side} threshold {gap_target[side]:.6g} is {gap:.3g} from the nearest observed value "
                f"{nearest:.6g} (observed {lo:.6g}..{hi:.6g}); the margin rule needs >= {need:.3g}")

    if op == "between":
        a, b = (float(t) for t in threshold)
        gap_target = {"lower": a, "upper": b}
        return gap_problem(lo, lo - a, "lower") or gap_problem(hi, b - hi, "upper")
    t = float(threshold)
    gap_target = {"lower": t, "upper": t}
    if op in (">", ">="):
        return gap_problem(lo, lo - t, "lower")
    return gap_problem(hi, t - hi, "upper")


def counterfactual_problem(op: str, threshold: Any, without: Iterable[float]) -> str | None:
    """None when every counterfactual value (the measurement with the cause removed) *fails* the check
    ``OP threshold`` with the margin rule's gap, else why not: a check that would pass without its
    cause, in any recorded run, is no evidence for that cause."""
    vals = [float(v) for v in without]
    if not vals:
        return "no recorded counterfactual"
    if op == "==":
        return None if all(v != float(threshold) for v in vals) else f"counterfactual equals {threshold}"
    if op == "between":
        a, b = (float(t) for t in threshold)
        below = [v for v in vals if v <= a]
        above = [v for v in vals if v >= b]
        if len(below) + len(above) < len(vals):
            return f"counterfactual values inside ({a:.6g}, {b:.6g}): the check would pass without its cause"
        return ((margin_problem("<", a, below) if below else None) or
                (margin_problem(">", b, above) if above else None))
    opposite = {">": "<=", ">=": "<", "<": ">=", "<=": ">"}[op]
    problem = margin_problem(opposite, threshold, vals)
    return None if problem is None else f"counterfactual: {problem}"


def code_only(src: str) -> str:
    """A cell's code without its comments, blank lines and trailing spaces: what runs. A comment is not
    code, so editing one (e.g. taking an answer out of the comment under a prompt) leaves the record fresh."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type != tokenize.COMMENT]
        src = tokenize.untokenize(tokens)
    except (tokenize.TokenError, SyntaxError):   # not plain Python (a magic): compare it as written
        pass
    return "\n".join(line.rstrip() for line in src.splitlines() if line.strip())


def code_fingerprint(code_cells: Sequence[str]) -> str:
    """sha256 of a notebook's code cells (prose and comment edits do not make a record stale; code edits do)."""
    h = hashlib.sha256()
    for src in code_cells:
        h.update(code_only(src).encode())
        h.update(b"\x00")
    return h.hexdigest()


def _without_thresholds(src: str) -> str:
    """A cell's code with every ``expect(key, value, OP, THRESHOLD)``'s op and threshold blanked: what decides the
    values the cell records (in the sweep no check stops a cell, RECORD_ONLY_VARIABLE), not which ones pass."""
    import ast

    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in src.splitlines()]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return code_only(src)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name == "expect":
                node.args[2:4] = [ast.Constant(None) for _ in node.args[2:4]]
    return ast.unparse(tree)


def cell_fingerprints(code_cells: Sequence[str]) -> list[str]:
    """One short sha256 per code cell of what decides its recorded values: its code without comments and without
    the checks' thresholds. The sweep keeps a key recorded by cell i of an earlier version of the notebook while
    cells 0..i are unchanged by this measure (``tools/sweep.py``: a later cell's edit, or a moved threshold,
    leaves the values of the cells before it valid for the same seed and thread count)."""
    return [hashlib.sha256(_without_thresholds(src).encode()).hexdigest()[:16] for src in code_cells]


def recorded(notebook: str) -> dict:
    """The committed sweep record of one notebook (e.g. "06_placement"), from normlab/records/."""
    try:
        text = resources.files("normlab").joinpath("records", f"{notebook}.json").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"没有 {notebook} 的测量记录 (no sweep record for {notebook}): "
                                "python3 run.py sweep --only " + notebook[:2]) from None
    return json.loads(text)


def ranges(notebook: str, keys: Sequence[str], labels: Sequence[str] | None = None):
    """A table of each key's recorded minimum, median and maximum over the sweep's runs (seeds 0-4 x
    threads), and over the extra seeds too when the record keeps them (``tools/sweep.py --extra``).
    A one-line note instead when there is no record yet or a key is not in it: the sweep runs a
    notebook before its record holds the notebook's new keys."""
    from statistics import median

    from .viz import Table

    try:
        rec = recorded(notebook)
    except FileNotFoundError:
        return f"（还没有测量记录 no sweep record yet: python3 run.py sweep --only {notebook[:2]}）"
    present = {k for run in rec["runs"] for k in run["values"]}
    if not set(keys) <= present:
        return f"（测量记录里还没有这些量 not yet in the sweep record: {sorted(set(keys) - present)}）"
    extra = rec.get("extra_runs") or []

    def span(runs: list, key: str) -> list[float]:
        vals = [v for run in runs for v in run["values"].get(key, [])] or [float("nan")]
        return [min(vals), median(vals), max(vals)]

    rows = [[label, *span(rec["runs"], key), *(span(extra, key) if extra else [])]
            for key, label in zip(keys, labels or keys)]
    seeds = sorted({r["seed"] for r in rec["runs"]})
    threads = sorted({r["threads"] for r in rec["runs"]})
    title = f"测量记录 (sweep record)：种子 seeds {seeds[0]}–{seeds[-1]} × 线程 threads {threads}"
    head = ["", "最小 min", "中位数 median", "最大 max"]
    if extra:
        more = sorted({r["seed"] for r in extra})
        title += f"；后三列：另外 {len(more)} 个种子 extra seeds {more[0]}–{more[-1]}（线程 1）"
        head += ["最小 min", "中位数 median", "最大 max"]
    else:
        head.append("次数 runs")
        for row, key in zip(rows, keys):
            row.append(len([v for run in rec["runs"] for v in run["values"].get(key, [])]))
    return Table(rows, head, floatfmt=".3g", title=title)


def seed_values(rec: dict, key: str) -> dict[int, float]:
    """One value of ``key`` per seed: the one-thread run of each seed the record holds (seeds 0-4 and the
    extra seeds), for claims about how many seeds show something."""
    out: dict[int, float] = {}
    for run in rec["runs"] + rec.get("extra_runs", []):
        if run["threads"] == 1 and run["values"].get(key):
            out.setdefault(run["seed"], run["values"][key][0])
    return out


FRACTION = __import__("re").compile(r"^(\d+)/(\d+)(<=|>=|<|>)(\S+)$")


def seed_count(rec: dict, form: str, key: str) -> str | None:
    """None when the prose's ``K/N<T`` (or >, <=, >=) is what the record shows: of the N seeds that recorded
    ``key`` (one-thread runs), exactly K have a value OP T; else what the record shows instead."""
    m = FRACTION.match(form)
    if not m:
        return f"not a seed-count form {form!r} (K/N<T)"
    k, n, op, t = int(m.group(1)), int(m.group(2)), m.group(3), float(m.group(4))
    vals = list(seed_values(rec, key).values())
    hits = sum(OPS[op](v, t) for v in vals)
    return None if (hits, len(vals)) == (k, n) else f"the record shows {hits}/{len(vals)}{op}{m.group(4)}, not {form}"


def range_wider(form: str, values: list[float]) -> str | None:
    """An ``X..Y`` marker whose ends are not the record's minimum and maximum at the quoted decimals: the range
    still holds the values, but it is wider than the record (a re-sweep moved the numbers, the prose kept the old)."""
    a, sep, b = form.partition("..")
    if not sep or "e" in form or not values:
        return None
    d = max(len(x.partition(".")[2]) for x in (a, b))
    lo, hi = round(min(values), d), round(max(values), d)
    return None if (lo, hi) == (float(a), float(b)) else f"the record is {lo:.{d}f}..{hi:.{d}f}: quote that, not {form}"


def marker_problem(form: str, values: list[float]) -> str | None:
    """Check one prose marker's claim (``<!--rec KEY FORM-->``) against every recorded value: ``X..Y`` (every
    value, rounded to the quoted decimals, in [X, Y]), ``>X``, ``<X``, ``~X`` (within a factor 1.5)."""
    lo, hi = min(values), max(values)
    if form.startswith(">"):
        return None if lo > float(form[1:]) else f"observed min {lo:.4g} is not > {form[1:]}"
    if form.startswith("<"):
        return None if hi < float(form[1:]) else f"observed max {hi:.4g} is not < {form[1:]}"
    if form.startswith("~"):
        x = float(form[1:])
        return None if x / 1.5 <= lo and hi <= 1.5 * x else f"observed {lo:.4g}..{hi:.4g} not within 1.5x of {x}"
    a, sep, b = form.partition("..")
    if not sep:
        return f"unknown marker form {form!r} (use >X, <X, ~X or X..Y)"
    decimals = max(len(s.partition(".")[2]) for s in (a, b)) if "e" not in form else None
    r = (lambda v: round(v, decimals)) if decimals is not None else (lambda v: v)
    return None if float(a) <= r(lo) and r(hi) <= float(b) else f"observed {lo:.4g}..{hi:.4g} outside {a}..{b}"
