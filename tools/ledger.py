"""(maintainers) The claims ledger: every claim a lesson's summary (小结), interview points (面试要点), its
instructor-guide section (要纠正的误解), the companion's claims table and errata make, with its evidence and
its scope, in normlab/ledger/NN_name.toml; the book shows it as book/evidence.md (one table per lesson).

    python3 tools/ledger.py draft 06      # TOML entries for 06's claims that have no ledger entry yet
    python3 tools/ledger.py page          # rewrite book/evidence.md from the ledger and the records
    python3 tools/ledger.py ranges        # after a sweep: each record range to what the record shows, and the page

An entry:

    [[claim]]
    where = "面试要点"          # 小结 | 面试要点 | 教师指南 | claims.toml | errata_A.toml ... errata_E.toml
    quote = "残差块的雅可比矩阵是"   # verbatim words of the bullet it stands for (an erratum: its id, "A1")
    claim = "..."               # what is claimed, with the qualifiers of its section
    scope = { init = "Xavier", depth = "32 层", seeds = "0–4 × 线程 1, 2" }
    evidence = [
      { record = "s2.residual.median_sigma_min", range = "0.331..0.362" },   # this lesson's record
      { record = "05_deepnorm:A8.x", range = "1.4..1.8", over = "all" },      # another record; all seeds
      { paper = "Xiong et al. 2020", at = "定理 1" },
      { code = "microsoft/torchscale@<40 hex>:torchscale/architecture/encoder.py", line = "..." },
      { section = "第 2 节" },
      { section = "第 3 节", lesson = "09" },             # a section of another lesson
    ]

A record range is the recorded minimum..maximum, each written with 3 significant digits (f"{v:.3g}"), over
seeds 0-4 x threads {1, 2} (the runs the prose markers quote), or over every recorded seed with over = "all".
tests/test_ledger.py checks that every bullet has an entry, that each entry's quote is still in its source,
that each range equals its record's, and that this page is up to date.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEDGER = ROOT / "normlab" / "ledger"
NOTEBOOKS = ROOT / "notebooks"
RECORDS = ROOT / "normlab" / "records"
COMPANION = ROOT / "normlab" / "companion"
INSTRUCTOR = ROOT / "book" / "instructor.md"
PAGE = ROOT / "book" / "evidence.md"
MARKER = re.compile(r"<!--\s*rec\s+(\S+)\s+(\S+)\s*-->")
SCOPES = ("init", "width", "depth", "lr", "schedule", "seeds")
SCOPE_NAMES = {"init": "初始化", "width": "宽度", "depth": "深度", "lr": "学习率", "schedule": "日程", "seeds": "种子"}
KINDS = ("record", "paper", "code", "section")


def lessons() -> list[str]:
    return [p.stem for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.md"))]


def plain(text: str) -> str:
    """A bullet as a reader sees it: markers out, one line."""
    return " ".join(MARKER.sub("", text).split())


def _section(text: str, heading: str) -> str:
    m = re.search(rf"^{heading}[^\n]*\n(.*?)(?=^#{{1,3}} |\Z)", text, re.S | re.M)
    return m.group(1) if m else ""


def _bullets(block: str) -> list[str]:
    out: list[str] = []
    for line in block.splitlines():
        if line.startswith("- "):
            out.append(line[2:])
        elif out and line.startswith("  ") and line.strip():
            out[-1] += " " + line.strip()
        elif not line.strip() or line.startswith(("+++", "**")):
            continue
    return [" ".join(b.split()) for b in out]


def _clauses(text: str) -> list[str]:
    """``text`` split at each "；" that is outside brackets (a "；" inside "（…）", "(…)" or "「…」" belongs to its
    clause). A stray closing bracket is ignored; an unclosed opening one keeps the rest in one clause."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth = depth + 1 if ch in "（(「" else max(depth - 1, 0) if ch in "）)」" else depth
        if ch == "；" and depth == 0:
            out.append(text[start:i])
            start = i + 1
    return out + [text[start:]]


def lesson_claims(stem: str) -> list[tuple[str, str]]:
    """(where, text) of each summary bullet and interview point of a lesson. A summary written as one
    paragraph ("**本课小结**：a；b；c") counts each clause as a bullet (``_clauses``: split at "；" outside brackets)."""
    text = (NOTEBOOKS / f"{stem}.md").read_text(encoding="utf-8")
    out = [("小结", b) for b in _bullets(_section(text, "## 小结"))]
    m = re.search(r"^\*\*本课小结\*\*：(.*)$", text, re.M)
    if m:
        out += [("小结", c.strip()) for c in _clauses(m.group(1)) if plain(c)]
    out += [("面试要点", b) for b in _bullets(_section(text, "## 面试要点"))]
    return out


def instructor_claims(stem: str) -> list[tuple[str, str]]:
    """The bullets of "### 要纠正的误解" under the instructor guide's "## NN · ..." section."""
    text = INSTRUCTOR.read_text(encoding="utf-8")
    m = re.search(rf"^## {stem[:2]} ·[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return [("教师指南", b) for b in _bullets(_section(m.group(1), "### 要纠正的误解"))] if m else []


def companion_claims(stem: str) -> list[tuple[str, str, str]]:
    """(where, quote, text) of each claims.toml entry and erratum whose course label points into this lesson."""
    out = []
    for path in sorted(COMPANION.glob("errata_*.toml")) + [COMPANION / "claims.toml"]:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for item in data.get("erratum", []) + data.get("claim", []):
            if item.get("course", "").split(".")[0] != stem[:2]:
                continue
            quote = item.get("id") or item["says"]
            text = " ".join(str(item.get(k, "")) for k in ("says", "right", "verdict"))
            out.append((path.name, quote, " ".join(text.split())))
    return out


def all_claims(stem: str) -> list[tuple[str, str, str]]:
    """(where, quote-or-"", text): everything the ledger of one lesson must cover."""
    return ([(w, "", t) for w, t in lesson_claims(stem) + instructor_claims(stem)] + companion_claims(stem))


def load(stem: str) -> list[dict]:
    path = LEDGER / f"{stem}.toml"
    return tomllib.loads(path.read_text(encoding="utf-8")).get("claim", []) if path.exists() else []


def covers(entry: dict, where: str, quote: str, text: str) -> bool:
    if entry.get("where") != where:
        return False
    if quote and where.startswith("errata_"):
        return entry.get("quote") == quote
    return bool(entry.get("quote")) and entry["quote"] in plain(text)


# --- records -------------------------------------------------------------------------------------

def fmt(v: float) -> str:
    return f"{v:.3g}"


@functools.lru_cache(maxsize=None)
def record_of(stem: str) -> dict | None:
    """A lesson's sweep record, read once per process (callers do not change it)."""
    path = RECORDS / f"{stem}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def split_key(stem: str, ref: str) -> tuple[str, str]:
    """"key" (this lesson's record) or "NN_name:key" (another's)."""
    if ":" in ref and re.match(r"\d\d_", ref):
        nb, _, key = ref.partition(":")
        return nb, key
    return stem, ref


def recorded_range(stem: str, ref: str, over: str = "0-4") -> str | None:
    """The record's range of a key as the ledger writes it ("lo..hi", 3 significant digits), or None."""
    nb, key = split_key(stem, ref)
    rec = record_of(nb)
    if rec is None:
        return None
    runs = rec["runs"] + (rec.get("extra_runs", []) if over == "all" else [])
    vals = [v for run in runs for v in run["values"].get(key, [])]
    return f"{fmt(min(vals))}..{fmt(max(vals))}" if vals else None


# --- drafts ----------------------------------------------------------------------------------------

CITATION = re.compile(r"([A-Z][A-Za-z\-]+(?: (?:et al\.|&|and) ?[A-Z]?[A-Za-z\-]*)?,? \d{4}[a-z]?)"
                      r"(?:[ ，,]*((?:§|图|表|定理|引理|Fig\.|Table|Alg\.)\s*[\w.]+(?:[、,，]\s*(?:§|图|表|定理|引理|Fig\.|Table|Alg\.)?\s*[\w.]+)*))?")
SECTION = re.compile(r"第 [\d.、 ]+节|「[^」]+」")


def guess_scope(text: str, has_record: bool) -> dict:
    scope = {}
    inits = re.findall(r"Xavier|He 初始化|Fixup|ReZero|GPT-2|LayerScale|DeepNorm|bert_init|N\(0, ?0\.02\)", text)
    if inits:
        scope["init"] = "、".join(dict.fromkeys(inits))
    depth = re.findall(r"\d+ ?(?:层|块)|N = [\d、 ]+", text)
    if depth:
        scope["depth"] = "、".join(dict.fromkeys(d.strip() for d in depth))
    width = re.findall(r"宽度 ?\d+|d ?= ?\d+|width \d+", text)
    if width:
        scope["width"] = "、".join(dict.fromkeys(width))
    lr = re.findall(r"(?:lr|学习率) ?=? ?[\d.e\-]+", text)
    if lr:
        scope["lr"] = "、".join(dict.fromkeys(lr))
    if re.search(r"预热|warm-?up", text):
        scope["schedule"] = "有无预热 (warm-up)"
    if has_record:
        scope["seeds"] = "0–4 × 线程 1、2"
    return scope


def _toml(v) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + " }"
    return json.dumps(v, ensure_ascii=False)


def draft(stem: str, where: str, quote: str, text: str) -> str:
    """A ledger entry for one claim, filled from what its text names: record keys in backticks or markers
    (with today's recorded range), papers with their section/figure, the course's sections."""
    evidence: list[dict] = []
    rec = record_of(stem) or {"runs": []}
    keys = {k for run in rec["runs"] for k in run["values"]}
    named = re.findall(r"`([^`]+)`", text) + [m.group(1) for m in MARKER.finditer(text)]
    if where.startswith("errata_") and quote:
        other = record_of("09_companion") or {"runs": []}
        named += [f"09_companion:{k}" for k in sorted({k for r in other["runs"] for k in r["values"]})
                  if k.startswith(quote + ".") and not k.endswith(".without")][:3]
    for ref in dict.fromkeys(named):
        nb, key = split_key(stem, ref)
        if (nb == stem and key in keys) or nb != stem:
            rng = recorded_range(stem, ref)
            if rng:
                evidence.append({"record": ref, "range": rng})
    for m in MARKER.finditer(text):                      # a marker's form (">0.5", "<0.05") is what the text claims
        if not m.group(2)[0].isdigit() and any(e.get("record") == m.group(1) for e in evidence):
            next(e for e in evidence if e.get("record") == m.group(1))["holds"] = m.group(2)
    for m in CITATION.finditer(text):
        evidence.append({"paper": m.group(1).strip(" ,"), "at": (m.group(2) or "").strip()})
    for s in dict.fromkeys(SECTION.findall(text)):
        evidence.append({"section": s})
    text = plain(text)
    short = quote if where.startswith("errata_") else text[: min(len(text), 24)].rstrip()
    lines = ["[[claim]]", f"where = {_toml(where)}", f"quote = {_toml(short)}",
             f"claim = {_toml(text if len(text) < 400 else text[:397] + '…')}",
             f"scope = {_toml(guess_scope(text, any('record' in e for e in evidence)))}",
             "evidence = [" + "".join(f"\n  {_toml(e)}," for e in evidence) + ("\n]" if evidence else "]")]
    return "\n".join(lines) + "\n"


def missing(stem: str) -> list[tuple[str, str, str]]:
    entries = load(stem)
    return [(w, q, t) for w, q, t in all_claims(stem) if not any(covers(e, w, q, t) for e in entries)]


# --- the book page ---------------------------------------------------------------------------------

LOG_PART = re.compile(r"(?:^|(?<=[._]))log(2|10)_")    # "a.log10_b", "a.b_log10_c": the check on log10 of "a.b", "a.b_c"
ORDER = ("<", "<=", ">", ">=")


def lesson_check(stem: str, key: str) -> tuple[str, tuple[str, float] | None] | None:
    """The check a lesson makes on ``key``, as its expect() states it, or on the key's logarithm (an expect() on
    ``a.log2_b`` for ``a.b``). Returns (text, bound): text as the page shows it (">0.5", "在 0.5–2 之间", "log2 >0.263，
    即 >1.2", and on a log key itself ">0.263（log2；原量 >1.2）"), bound = (op, threshold in the units of ``key``) for
    an order check, else None; None where the lesson only measures the key."""
    claims = (record_of(stem) or {}).get("claims", {})
    if key in claims:
        op, t = claims[key]["op"], claims[key]["threshold"]
        if op == "between":
            return f"在 {t[0]:g}–{t[1]:g} 之间", None
        if op not in ORDER or isinstance(t, bool) or not isinstance(t, (int, float)):
            return f"{op}{t}" if isinstance(t, bool) or not isinstance(t, (int, float)) else f"{op}{t:g}", None
        m = LOG_PART.search(key)
        text = f"{op}{t:.3g}（log{m.group(1)}；原量 {op}{int(m.group(1)) ** t:.3g}）" if m else f"{op}{t:g}"
        return text, (op, float(t))
    for log_key, c in claims.items():                                # the check on this key's logarithm
        m = LOG_PART.search(log_key)
        if m and LOG_PART.sub("", log_key, count=1) == key and c["op"] in ORDER and isinstance(c["threshold"], (int, float)):
            base, op, t = int(m.group(1)), c["op"], c["threshold"]
            return f"log{base} {op}{t:.3g}，即 {op}{base ** t:.3g}", (op, float(base ** t))
    return None


def implied(holds: str, bound: tuple[str, float] | None) -> bool:
    """Does the lesson's check (``bound``: op and threshold in the key's own units) already say what ``holds``
    (">1.5", the ledger's bound on the same key) says, or more? Only order checks in the same direction do."""
    m = re.fullmatch(r"([<>]=?)(-?[\d.]+(?:e[+-]?\d+)?)", holds or "")
    if not m or not bound or m.group(1)[0] != bound[0][0]:
        return False
    (h_op, h), (c_op, t) = (m.group(1), float(m.group(2))), bound
    if c_op == h_op or len(h_op) == 2:               # x > t implies x > h when t >= h; also x >= h; x >= t: x >= h
        return t >= h if h_op[0] == ">" else t <= h
    return t > h if h_op == ">" else t < h           # x >= t implies x > h only when t > h


def _evidence_cell(stem: str, e: dict) -> str:
    if "record" in e:
        lo, _, hi = e["range"].partition("..")
        seeds = "全部种子" if e.get("over") == "all" else "种子 0–4"
        nb, key = split_key(stem, e["record"])
        every = "全部种子都" if e.get("over") == "all" else "种子 0–4 都"
        check, bound = lesson_check(nb, key) or (None, None)   # the lesson's own expect() on this key (or its log)
        holds = e.get("holds")
        inner = seeds + (f"，检查 {check}" if check else "")
        if holds and not implied(holds, bound):       # what the ledger says holds: a count over the seeds, not the check
            inner += f"；{every} {holds}" + ("" if check else "，不是检查")
        if e.get("count"):                            # "48/50<0.3": checked against the record (tests/test_ledger.py)
            k, n, op, t = re.fullmatch(r"(\d+)/(\d+)([<>]=?)(\S+)", e["count"]).groups()
            inner += f"；记录的 {n} 个种子中 {k} 个 {op}{t}"
        return f"记录 `{e['record']}`：{lo}–{hi}（{inner}）"
    if "paper" in e:
        return f"{e['paper']} {e.get('at', '')}".strip()
    if "code" in e:
        return f"`{e['code']}`：`{e.get('line', '')}`"
    where = f"第 {e['lesson']} 课" if e.get("lesson") else "本课"     # a section of another lesson names it
    return f"{where}{e['section']}" if e["section"].startswith(("第", "「", "练习")) else f"{where} {e['section']}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def page() -> str:
    out = ["# 证据表 (evidence)", "",
           "每一课的小结、面试要点、教师指南里要纠正的误解、资料伴读的说法与勘误，各是一条结论 (claim)。这一页列出每条结论"
           "的**证据** (evidence)：一个测量记录的键和它在种子 0–4 × 线程 1、2（或全部记录的种子）上的范围、一篇论文的节/图/表、"
           "或一段代码，以及它成立的**范围** (scope)：初始化、宽度、深度、学习率、日程、种子。"
           "表由 `normlab/ledger/` 和 `normlab/records/` 生成（`python3 tools/ledger.py page`），测试检查每个范围与记录一致。", ""]
    for stem in lessons():
        entries = load(stem)
        if not entries:
            continue
        # folded: the table states the lesson's conclusions, so a learner opens it after the lesson (predict before see)
        out += [f"## {stem}", "", f"<details><summary>学完第 {stem[:2]} 课再展开 (open after the lesson): "
                f"{len(entries)} 条结论</summary>", "",
                "| 出处 | 结论 | 范围 (scope) | 证据 (evidence) |", "|---|---|---|---|"]
        for e in entries:
            scope = "；".join(f"{SCOPE_NAMES[k]}：{e['scope'][k]}" for k in SCOPES if k in e.get("scope", {})) or "—"
            ev = "<br>".join(_cell(_evidence_cell(stem, x)) for x in e.get("evidence", [])) or "—"
            if e.get("derived"):                       # arithmetic behind a number of the claim
                ev += "<br>" + _cell("数的来历：" + "；".join(e["derived"]))
            where = e["where"] + (f" {e['quote']}" if e["where"].startswith("errata_") else "")
            out.append(f"| {_cell(where)} | {_cell(e['claim'])} | {_cell(scope)} | {ev} |")
        out += ["", "</details>", ""]
    return "\n".join(out)


def update_ranges(stem: str) -> list[str]:
    """Rewrite each record range of a lesson's ledger to what its record shows now (after a sweep); return what
    changed, so the claims that quote those numbers can be read again."""
    path = LEDGER / f"{stem}.toml"
    changed: list[str] = []

    def fix(m: re.Match) -> str:
        ref, old, rest = m.group(1), m.group(2), m.group(3)
        now = recorded_range(stem, ref, "all" if 'over = "all"' in rest else "0-4")
        if now and now != old:
            changed.append(f"{stem} {ref}: {old} -> {now}")
            return m.group(0).replace(f'range = "{old}"', f'range = "{now}"')
        return m.group(0)

    if path.exists():
        text = re.sub(r'\{ record = "([^"]+)", range = "([^"]*)"([^}]*)\}', fix, path.read_text(encoding="utf-8"))
        path.write_text(text, encoding="utf-8")
    return changed


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from normlab.console import console_safe   # drafts hold √, ‖, σ: readable on a GBK console too

    console_safe()
    if argv[:1] == ["ranges"]:
        for stem in lessons():
            for line in update_ranges(stem):
                print(line)
        PAGE.write_text(page(), encoding="utf-8")
        return 0
    if argv[:1] == ["page"]:
        PAGE.write_text(page(), encoding="utf-8")
        print(f"wrote {PAGE.relative_to(ROOT)}")
        return 0
    if argv[:1] == ["draft"]:
        chosen = [s for s in lessons() if not argv[1:] or any(s.startswith(p) for p in argv[1:])]
        for stem in chosen:
            todo = missing(stem)
            if todo:
                print(f"# ---- normlab/ledger/{stem}.toml: {len(todo)} claim(s) without an entry")
                for w, q, t in todo:
                    print(draft(stem, w, q, t))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
