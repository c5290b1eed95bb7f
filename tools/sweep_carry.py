"""(maintainers) The sweep's record surgery, apart from running notebooks (tools/sweep.py): which code cell
recorded each key (cell tags), the part of a run that an unchanged prefix of cells keeps (carry), merging extra
runs by seed, the literal thresholds of a lesson's checks, and taking moved thresholds into a record without a run.
"""

from __future__ import annotations

import json
from pathlib import Path


def key_cell(cells: list[str], key: str, rec: dict | None = None) -> int:
    """The code cell that records ``key``: from a run of the record that tagged it, else the cell whose code
    names it as a string literal ("key" or 'key')."""
    for run in (rec or {}).get("runs", []) + (rec or {}).get("extra_runs", []):
        if key in run.get("cell_of", {}):
            return run["cell_of"][key]
    hits = [i for i, c in enumerate(cells) if f'"{key}"' in c or f"'{key}'" in c]
    if not hits:
        raise SystemExit(f"[sweep] no code cell records {key!r} (name it as written in expect()/measure())")
    return hits[0]


def tag_cells(runs: list[dict], cells: list[str], tagged: list[dict]) -> None:
    """Give every run that lacks it (runs recorded before cells were tagged) the cell that recorded each key,
    from the ``tagged`` runs of the same code, else from the key written as a literal in a cell."""
    known: dict[str, int] = {}
    for run in tagged:
        known.update(run.get("cell_of", {}))
    for run in runs:
        if "cell_of" in run:
            continue
        cell_of = {}
        for key in run["values"]:
            base = key.removesuffix(".without")
            hits = [i for i, c in enumerate(cells) if f'"{base}"' in c or f"'{base}'" in c]
            if key in known or base in known:
                cell_of[key] = known.get(key, known.get(base))
            elif hits:
                cell_of[key] = hits[0]
        run["cell_of"] = cell_of
        run.setdefault("cells", len(cells))


def first_changed(old: list[str], new: list[str]) -> int:
    """Index of the first code cell whose fingerprint (record.cell_fingerprints) differs; len when none does."""
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            return i
    return min(len(old), len(new)) if len(old) != len(new) else len(new)


def carry_prefix(runs: list[dict], upto: int, claims: dict) -> list[dict]:
    """The part of each run recorded by code cells 0..upto-1 (unchanged since): its keys from those cells, ok
    when no cell among them raised and every kept check holds under today's thresholds (``claims``)."""
    from normlab.record import _holds

    out = []
    for run in runs:
        cell_of = run.get("cell_of", {})
        values = {k: v for k, v in run["values"].items() if cell_of.get(k, upto) < upto}
        if not values:
            continue
        error_cell = run.get("error_cell", None if run["ok"] else 0)   # an untagged failed run keeps nothing ok
        raised = error_cell is not None and error_cell < upto
        holds = all(_holds(v, claims[k]["op"], claims[k]["threshold"]) for k in values if k in claims for v in values[k])
        out.append({**run, "values": values, "cell_of": {k: cell_of[k] for k in values},
                    "cells": min(run.get("cells", upto), upto), "ok": not raised and holds,
                    "error": run.get("error") if raised or not holds else None})
    return out


def merge_runs(old: list[dict], new: list[dict]) -> list[dict]:
    """Extra runs by seed: a new run of a seed replaces the keys it recorded and keeps the older run's others."""
    by_seed = {r["seed"]: r for r in old}
    for r in new:
        was = by_seed.get(r["seed"])
        if was is not None and was.get("cells", 0) > r.get("cells", 0):
            r = {**was, "values": {**was["values"], **r["values"]},
                 "cell_of": {**was.get("cell_of", {}), **r.get("cell_of", {})}, "ok": was["ok"] and r["ok"],
                 "error": r.get("error") or was.get("error")}
        by_seed[r["seed"]] = r
    return [by_seed[s] for s in sorted(by_seed)]


def literal_checks(cells: list[str]) -> list[tuple[str, dict | None]]:
    """Every ``expect(KEY, value, OP, THRESHOLD)`` of the code as (a regex of its key: an f-string's fields match
    anything, {"op": OP, "threshold": THRESHOLD}); the dict is None where op or threshold is not a literal."""
    import ast
    import re

    def pattern(node) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return re.escape(node.value)
        if isinstance(node, ast.JoinedStr):
            return "".join(re.escape(v.value) if isinstance(v, ast.Constant) else ".+" for v in node.values)
        return None

    out: list[tuple[str, dict | None]] = []
    for src in cells:
        lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in src.splitlines()]
        for node in ast.walk(ast.parse("\n".join(lines))):
            f = getattr(node, "func", None)
            if not (isinstance(node, ast.Call) and (getattr(f, "id", None) or getattr(f, "attr", None)) == "expect"):
                continue
            key = pattern(node.args[0]) if node.args else None
            try:
                op, threshold = (ast.literal_eval(a) for a in (node.args[2], node.args[3]))
                claim = {"op": op, "threshold": list(threshold) if op == "between" else float(threshold)}
            except (ValueError, IndexError):
                claim = None
            out.append((key or ".*", claim))
    return out


def rethreshold_record(path: Path, cells: list[str]) -> str | None:
    """Take moved thresholds into a record without running anything, when that is sound: every code cell's
    record.cell_fingerprints (the code without the checks' thresholds) is what the record was made with, and every
    run either passed (no check stopped a cell) or ran with NORMLAB_RECORD_ONLY (none could). Each run's ok is then
    judged again by the new thresholds. None when done, else why not."""
    import normlab.record as record

    rec = json.loads(path.read_text(encoding="utf-8"))
    if rec.get("cells") != record.cell_fingerprints(cells):
        return "code other than thresholds changed (or the record has no cell fingerprints): run the sweep"
    import re

    checks = literal_checks(cells)
    for key, claim in rec["claims"].items():
        found = [c for pat, c in checks if re.fullmatch(pat, key)]
        # several expect()s may match one key (an f-string key in a loop): fine when they agree on op and threshold
        if not found or any(c is None or c != found[0] for c in found):
            return f"{key}: not one expect() with a literal op and threshold: run the sweep"
        claim.update(found[0])
    for run in rec["runs"] + rec.get("extra_runs", []):
        if not run["ok"] and run.get("error_cell") is not None:
            return f"seed {run['seed']} threads {run['threads']} raised in cell {run['error_cell']}: run the sweep"
        held = all(record._holds(v, c["op"], c["threshold"]) for k, c in rec["claims"].items()
                   for v in run["values"].get(k, []))
        held = held and not any(record._holds(w, c["op"], c["threshold"]) for k, c in rec["claims"].items()
                                if c.get("because") for w in run["values"].get(k + record.WITHOUT, []))
        run["ok"], run["error"] = held, None if held else "a check fails under the new thresholds"
    rec["code_sha256"] = record.code_fingerprint(cells)
    path.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return None
