"""The claims ledger (issue 35): every claim of a lesson's summary, interview points, instructor-guide section,
companion claims and errata has an entry in normlab/ledger/NN_name.toml with its evidence and scope; every
record range there equals the record's; every measured number in the instructor guide, the glossary, the
companion's TOML files and the ledger comes from a record (a marker) or a citation; book/evidence.md is the
ledger as the book shows it. Reads text and JSON only: about 1 s.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from normlab import record

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import ledger  # noqa: E402  (tools/ledger.py)

LESSONS = ledger.lessons()
CODE_REF = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}:\S+$")


def unmapped_message(stem: str, todo: list) -> str:
    parts = [f"{stem}: {len(todo)} claim(s) without a ledger entry. Add each entry below to "
             f"normlab/ledger/{stem}.toml (`python3 tools/ledger.py draft {stem[:2]}` prints them), complete its "
             "scope with the section's qualifiers (init, width, depth, lr, schedule, seeds) and its evidence, "
             "then `python3 tools/ledger.py page`:"]
    parts += [f"--- {w} «{t[:60]}»\n{ledger.draft(stem, w, q, t)}" for w, q, t in todo]
    return "\n".join(parts)


@pytest.mark.parametrize("stem", LESSONS)
def test_every_claim_has_a_ledger_entry(stem):
    todo = ledger.missing(stem)
    assert not todo, unmapped_message(stem, todo)


def test_clauses_split_only_outside_brackets():
    assert ledger._clauses("a；b（c；d）；e") == ["a", "b（c；d）", "e"]
    assert ledger._clauses("a）；b（c；d）；e") == ["a）", "b（c；d）", "e"]       # a stray ）: no negative depth
    assert ledger._clauses("a「b；c」；d") == ["a「b；c」", "d"]
    assert ledger._clauses("a（b；c；d") == ["a（b；c；d"]                       # unclosed: one clause, nothing lost


def record_evidence(field: str):
    """(stem, entry, evidence, lesson, key) for every record evidence of every ledger entry that has ``field``."""
    for stem in LESSONS:
        for e in ledger.load(stem):
            for ev in e.get("evidence", []):
                if ev.get(field):
                    yield (stem, e, ev) + ledger.split_key(stem, ev["record"])


def test_ledger_seed_counts_are_what_the_records_show():
    """An evidence's ``count`` ("48/50<0.3", shown on the evidence page) is what the record's one-thread runs show."""
    problems = []
    for stem, e, ev, nb, key in record_evidence("count"):
        why = record.seed_count(ledger.record_of(nb), ev["count"], key)
        if why:
            problems.append(f"{stem} «{e['quote']}» {ev['record']} count {ev['count']}: {why}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stem", LESSONS)
def test_a_seed_count_in_a_claim_has_its_count_evidence(stem):
    """"记录的 50 个种子中 49 个" in a claim: some record evidence of the entry has count "49/50…", so the
    evidence page shows the count and a test checks it against the record."""
    missing = []
    for e in ledger.load(stem):
        counts = {tuple(ev["count"].split("/")[:1]) + (re.match(r"\d+", ev["count"].split("/")[1]).group(),)
                  for ev in e.get("evidence", []) if ev.get("count")}
        for n, k in re.findall(r"(\d+) 个种子中(?:的|只有)? ?(\d+) 个", e.get("claim", "")):
            if (k, n) not in counts:
                missing.append(f"  «{e['quote']}»: {k}/{n} has no evidence with count = \"{k}/{n}…\"")
    assert not missing, f"{stem}: seed counts in claims without a count evidence:\n" + "\n".join(missing)


@pytest.mark.parametrize("stem", LESSONS)
def test_a_summary_or_interview_entry_states_its_bullet_as_it_reads_now(stem):
    """The ledger's ``claim`` of a 小结, 面试要点 or 教师指南 entry is its bullet word for word (a reworded bullet whose first
    words stayed the same still matched its ``quote``, and the evidence page kept quoting the old wording)."""
    bullets = [(w, ledger.plain(b)) for w, b in ledger.lesson_claims(stem) + ledger.instructor_claims(stem)]
    stale = []
    for e in ledger.load(stem):
        if e.get("where") not in ("小结", "面试要点", "教师指南"):
            continue
        now = [b for w, b in bullets if w == e["where"] and e.get("quote") and e["quote"] in b]
        claim = e.get("claim", "")
        cut = claim.endswith("…") and len(claim) == 398          # the ledger cuts a bullet of 400+ characters at 397
        if now and not any(claim == b or (cut and len(b) >= 400 and b.startswith(claim[:-1])) for b in now):
            stale.append(f"  quote = {e['quote']!r}\n    ledger: {claim[:120]}…\n    bullet: {now[0][:120]}…")
    assert not stale, f"{stem}: ledger claims that differ from their bullet (copy the bullet's text):\n" + "\n".join(stale)


@pytest.mark.parametrize("stem", LESSONS)
def test_a_companion_entry_states_its_source_as_it_reads_now(stem):
    """A claims.toml or errata entry's ``claim`` is its source's text (says, right, verdict) word for word: errata
    are matched by id, so a corrected erratum kept its old text on the evidence page (14 such, including C1's
    '36 层及以上用 1e-6' and A5's 'Adam 的有效学习率乘了 β' that earlier reviews had fixed in the source)."""
    sources = ledger.companion_claims(stem)
    stale = []
    for e in ledger.load(stem):
        w = e.get("where", "")
        if w != "claims.toml" and not w.startswith("errata_"):
            continue
        now = [t for ww, q, t in sources if ledger.covers(e, ww, q, t)]
        claim = e.get("claim", "")
        cut = claim.endswith("…") and len(claim) == 398
        if now and not any(claim == t or (cut and len(t) >= 400 and t.startswith(claim[:-1])) for t in now):
            stale.append(f"  {w} «{e['quote'][:30]}»\n    ledger: {claim[:100]}…\n    source: {now[0][:100]}…")
    assert not stale, f"{stem}: companion entries whose claim differs from their source (copy it):\n" + "\n".join(stale)


@pytest.mark.parametrize("stem", LESSONS)
def test_every_entry_is_a_claim_that_is_still_there(stem):
    claims = ledger.all_claims(stem)
    stale = [e for e in ledger.load(stem) if not any(ledger.covers(e, w, q, t) for w, q, t in claims)]
    assert not stale, (f"{stem}: ledger entries whose quote is no longer in their source ({ledger.LEDGER.name}/{stem}.toml); "
                       "change `quote` to words of the bullet as it reads now, or delete the entry with its claim:\n"
                       + "\n".join(f"  where = {e.get('where')!r}, quote = {e.get('quote')!r}" for e in stale))


@pytest.mark.parametrize("stem", LESSONS)
def test_entries_have_evidence_and_scope(stem):
    problems = []
    for e in ledger.load(stem):
        name = f"{e.get('where')} «{e.get('quote')}»"
        if not e.get("claim"):
            problems.append(f"{name}: no claim")
        if not isinstance(e.get("scope"), dict) or set(e["scope"]) - set(ledger.SCOPES):
            problems.append(f"{name}: scope must be a table of {ledger.SCOPES}")
        if not e.get("evidence"):
            problems.append(f"{name}: no evidence (a record key and range, a paper and where in it, code at a commit)")
        for ev in e.get("evidence", []):
            kinds = set(ev) & set(ledger.KINDS)
            if len(kinds) != 1:
                problems.append(f"{name}: each evidence item is one of {ledger.KINDS}: {ev}")
            elif "code" in ev and not (CODE_REF.match(ev["code"]) and ev.get("line")):
                problems.append(f"{name}: code evidence is owner/repo@<40 hex>:path with the line that runs: {ev}")
            elif "paper" in ev and not ev.get("at"):
                problems.append(f"{name}: say where in {ev['paper']} (§, 图/Fig., 表/Table, 定理)")
            elif "record" in ev and "seeds" not in e.get("scope", {}):
                problems.append(f"{name}: a measured claim says its seeds in scope.seeds")
    assert not problems, f"{stem}:\n" + "\n".join(problems)


def section_found(text: str, section: str) -> bool:
    """A ``section`` evidence names a heading of its lesson: "第 4.1 节" (## 4.1 ...), "「title」", "练习 02.4", "A4"."""
    heads = [h.strip() for h in re.findall(r"^#{2,4} (.*)$", text, re.M)]
    if m := re.fullmatch(r"第 ([\d.、]+) 节", section):                # "第 4.1 节", "第 1、2 节"
        return all(any(re.match(rf"{re.escape(n)}\.?\s", h) for h in heads) for n in m.group(1).split("、"))
    title = section.strip("「」")
    return any(title in h for h in heads)


@pytest.mark.parametrize("stem", LESSONS)
def test_a_section_evidence_is_a_section_of_its_lesson(stem):
    """{ section = "第 3 节" } is this lesson's §3; a section of another lesson names it ({ ..., lesson = "09" }):
    the page printed "本课第 3 节" for 09's §3 under lesson 02 (a fresh read of 920d5f9)."""
    bad = []
    for e in ledger.load(stem):
        # a claim that names another lesson's section ("第 09 课第 3 节", "04 课第 5 节") cites it with lesson = "NN",
        # not as this lesson's section of the same number (which exists, so the heading check alone passes)
        for nn, sec in re.findall(r"(?:第 )?(\d\d) 课第 ([\d.]+) 节", e.get("claim", "")):
            if nn != stem[:2] and any(ev.get("section") == f"第 {sec} 节" and "lesson" not in ev
                                      for ev in e.get("evidence", [])):
                bad.append(f"  «{e['quote'][:30]}» names 第 {nn} 课第 {sec} 节: its evidence needs lesson = \"{nn}\"")
        for ev in e.get("evidence", []):
            if "section" in ev:
                nb = next(s for s in LESSONS if s[:2] == ev.get("lesson", stem[:2]))
                if not section_found((ledger.NOTEBOOKS / f"{nb}.md").read_text(encoding="utf-8"), ev["section"]):
                    bad.append(f"  «{e['quote'][:30]}» {ev}: no such heading in {nb}")
    assert not bad, f"{stem}: section evidence that is not a heading of the lesson it names:\n" + "\n".join(bad)


@pytest.mark.parametrize("stem", LESSONS)
def test_scopes_are_written_not_drafted(stem):
    """A scope value is written from its section, not left as the draft's regex match: no key fragment ("lr3e-3.",
    "lr."), no bare "初始化时" without the scheme (a fresh read of 920d5f9 found 14 such on the evidence page)."""
    bad = []
    for e in ledger.load(stem):
        for k, v in e.get("scope", {}).items():
            if re.search(r"[A-Za-z0-9]\.$|(^|、)lr\.|^初始化时(（未训练）)?$", v):
                bad.append(f"  «{e['quote'][:30]}» {k} = {v!r}")
    assert not bad, f"{stem}: scopes to write from the section (init scheme, width, depth, lr, schedule, seeds):\n" + "\n".join(bad)


@pytest.mark.parametrize("stem", LESSONS)
def test_ledger_ranges_equal_their_records(stem):
    problems = []
    for e in ledger.load(stem):
        for ev in e.get("evidence", []):
            if "record" in ev:
                now = ledger.recorded_range(stem, ev["record"], ev.get("over", "0-4"))
                if now != ev.get("range"):
                    problems.append(f"«{e['quote']}» {ev['record']}: the ledger says {ev.get('range')}, "
                                    f"the record {now} (python3 tools/ledger.py ranges writes it; then read the claim again)")
    assert not problems, f"{stem}:\n" + "\n".join(problems)


# --- every number from a record or a citation ---------------------------------------------------------

MEASURED = re.compile(r"\d+(?:\.\d+)?(?:\s*[–~-]\s*\d+(?:\.\d+)?)?\s*(?:倍|×(?!\s*线程)|%)|[一二两三四五六七八九十百千万]+\s*倍"
                      r"|\d+\.\d+\s*[–-]\s*\d+\.\d+|(?<=约)\s*\d+\.\d+")
# A citation that points into its source (a paper's §/figure/table/theorem, code at a commit). It sources the numbers
# of its sentence unless the sentence speaks of our seeds: then the number is ours and needs its record.
CITATION = re.compile(r"§|Fig\.|Table|图\s*\d|表\s*\d|定理|引理|@[0-9a-f]{7,}|Alg\.|arXiv|deploy/sizing\.json")
OURS = re.compile(r"种子|seed")
THIS_MACHINE = re.compile(r"本机|这台机器|2 核")     # a number of this machine's speed is not a claim about norms
NOT_PROSE = re.compile(r"`[^`]*`|「[^」]*」|“[^”]*”|\"[^\"\n]*\"|<!--(?!\s*rec)[^>]*-->")
# Right after a number: "<!--setting-->" says it is an input the text sets (scale q, k by 1000), not a measurement.
EXEMPT_AFTER = re.compile(r"\s*<!--\s*(?:rec\s|setting\s*-->)")
# TOML fields that hold a document's own words (the course quotes them, it does not claim them).
QUOTED_FIELDS = {"says", "part", "heading", "phrase", "where"}


def unsourced_numbers(text: str) -> list[tuple[str, str]]:
    """(number, sentence) for each measured number (a range of decimals, N 倍/×/%, 两千倍, 约 0.03) that has no
    <!--rec--> marker (or <!--setting-->) right after it and no citation in its sentence; a paragraph about this
    machine's speed (本机, 2 核) with its table is exempt; code, section titles and quoted text are not read."""
    out = []
    for para in re.split(r"\n\s*\n(?!\|)", text):
        if THIS_MACHINE.search(para):
            continue
        for sentence in re.split(r"[。；\n]", para):
            if CITATION.search(sentence) and not OURS.search(sentence):
                continue
            prose = NOT_PROSE.sub(lambda m: m.group(0) if "setting" in m.group(0) else " ", sentence)
            for m in MEASURED.finditer(prose):
                if not EXEMPT_AFTER.match(prose[m.end():]):
                    out.append((m.group(0).strip(), prose.strip()[:100]))
    return out


def instructor_markers(text: str) -> list[tuple[str, str, str, str]]:
    """(notebook, key, form, text before) of each marker in the instructor guide: KEY is "NN_name:key", or a key
    of the lesson whose "## NN ·" section holds the marker."""
    out, lesson = [], None
    for line in text.splitlines():
        m = re.match(r"## (\d\d) ·", line)
        if m:
            lesson = next((s for s in LESSONS if s.startswith(m.group(1))), None)
        for mk in ledger.MARKER.finditer(line):
            nb, key = ledger.split_key(lesson or "", mk.group(1))
            out.append((nb, key, mk.group(2), line[max(0, mk.start() - 40): mk.start()]))
    return out


def marker_problems(markers: list[tuple[str, str, str, str]]) -> list[str]:
    problems = []
    for nb, key, form, before in markers:
        rec = ledger.record_of(nb) if nb else None
        vals = [v for run in (rec or {"runs": []})["runs"] for v in run["values"].get(key, [])]
        if not vals:
            problems.append(f"{nb}:{key}: not in a record (write the key as NN_name:key outside a lesson's section)")
            continue
        why = record.seed_count(rec, form, key) if record.FRACTION.match(form) else record.marker_problem(form, vals)
        why = why or record.range_wider(form, vals)
        if why:
            problems.append(f"{nb}:{key} {form} (after '…{before[-25:]}'): {why}")
        a, sep, b = form.partition("..")
        if sep and not (a in before and b in before):
            problems.append(f"{nb}:{key}: the text before the marker should quote the range {a}–{b}")
    return problems


def number_message(name: str, found: list[tuple[str, str]]) -> str:
    return (f"{name}: measured numbers with neither a record nor a citation. After each, put the marker of the "
            "record it comes from, <!--rec NN_name:key lo..hi--> (the range the record shows for seeds 0-4; in a "
            "TOML string give the entry a `records = [\"NN_name:key lo..hi\"]` field instead), or cite its source "
            "(a paper with §/图/表, code at file@commit) in the same sentence:\n"
            + "\n".join(f"  {n!r} in «{s}»" for n, s in found))


def test_instructor_numbers_come_from_a_record_or_a_citation():
    text = ledger.INSTRUCTOR.read_text(encoding="utf-8")
    found = unsourced_numbers(text)
    assert not found, number_message("book/instructor.md", found)
    problems = marker_problems(instructor_markers(text))
    assert not problems, "book/instructor.md: markers that disagree with their record:\n" + "\n".join(problems)


def test_glossary_numbers_come_from_a_record_or_a_citation():
    found = unsourced_numbers((ROOT / "book" / "glossary.md").read_text(encoding="utf-8"))
    assert not found, number_message("book/glossary.md", found)


def toml_strings(data) -> list[tuple[dict, str]]:
    """(the table it belongs to, string) for every string of a TOML document the course itself says."""
    out = []
    if isinstance(data, dict):
        for k, v in data.items():
            if isinstance(v, str):
                if k not in QUOTED_FIELDS:
                    out.append((data, v))
            else:
                out += toml_strings(v)
    elif isinstance(data, list):
        for v in data:
            out += toml_strings(v)
    return out


def covered_by_records(table: dict, number: str) -> bool:
    """A number of a companion entry is sourced when its `records` field ("NN_name:key lo..hi" or "NN_name:key ~X",
    each checked below) gives it as a bound, or its `derived` field shows the arithmetic that gives it."""
    bounds = {b.lstrip("<>~") for r in table.get("records", []) for b in r.split()[-1].split("..")}
    return (all(x in bounds for x in re.findall(r"\d+(?:\.\d+)?", number))
            or any(number in d for d in table.get("derived", [])))


@pytest.mark.parametrize("path", sorted((ROOT / "normlab" / "companion").glob("*.toml")), ids=lambda p: p.name)
def test_companion_numbers_come_from_a_record_or_a_citation(path):
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    found = [(n, s) for table, text in toml_strings(data) for n, s in unsourced_numbers(text)
             if not covered_by_records(table, n)]
    assert not found, number_message(f"normlab/companion/{path.name}", found)
    refs = [r for table, _ in toml_strings(data) for r in table.get("records", [])]
    markers = []
    for r in dict.fromkeys(refs):
        ref, form = r.split()
        nb, key = ledger.split_key("", ref)
        markers.append((nb, key, form, form.replace("..", " ")))
    problems = marker_problems(markers)
    assert not problems, f"normlab/companion/{path.name}: records that disagree:\n" + "\n".join(problems)


def ledger_number_problems(stem: str) -> list[str]:
    """A number in a ledger claim is a bound of one of its record ranges as the prose rounds it, or the number of
    what a record evidence holds (holds = "<0.5": "低于 50%"), or arithmetic the entry's ``derived`` shows (the
    evidence page prints it; an evidence's free-text ``note`` does not count: the page does not show it), or the
    entry cites only a paper or code."""
    problems = []
    for e in ledger.load(stem):
        cited = any("paper" in ev or "code" in ev for ev in e.get("evidence", []))
        if cited and not any("record" in ev for ev in e.get("evidence", [])):
            continue                                  # only a paper or code: its numbers are the citation's
        records = [ev for ev in e.get("evidence", []) if "record" in ev and ev.get("range")]
        bounds = [float(b) for ev in records for b in ev["range"].split("..")]
        bounds += [float(ev["holds"].lstrip("<>=~")) for ev in records if ev.get("holds")]
        bounds += [float(re.split(r"[<>]=?", ev["count"])[1]) for ev in records if ev.get("count")]   # "50/50>2.5"
        notes = ""                                                                  # derived only: the page shows it
        notes += " ".join(e.get("derived", []))                                   # arithmetic the claim shows
        spans = [[float(b) for b in ev["range"].split("..")] for ev in records]
        for n, sentence in unsourced_numbers(e.get("claim", "")):
            if n in notes:
                continue
            pair = re.findall(r"\d+(?:\.\d+)?", n)
            if len(pair) == 2 and "%" not in n:        # a quoted range "a–b": a record range inside it, as the prose rounds
                d = max(len(x.partition(".")[2]) for x in pair)
                if any(float(pair[0]) <= round(lo, d) and round(hi, d) <= float(pair[1]) for lo, hi in spans):
                    continue
            for x in pair:
                tol = 0.5 * 10 ** -len(x.partition(".")[2]) + 1e-9
                candidates = [float(x)] + ([float(x) / 100] if "%" in n else [])
                if not any(abs(c - b) <= tol * (0.01 if c != float(x) else 1) for c in candidates for b in bounds):
                    problems.append(f"«{e['quote']}»: {x} (in {n!r}) is no bound of its record evidence {bounds}: add the "
                                    "record it comes from (range, or holds = \"<X\" for a check's threshold)")
    return problems


def test_ledger_holds_are_what_the_records_show():
    problems = []
    for stem, e, ev, nb, key in record_evidence("holds"):
        rec = ledger.record_of(nb)
        runs = rec["runs"] + (rec.get("extra_runs", []) if ev.get("over") == "all" else [])
        vals = [v for run in runs for v in run["values"].get(key, [])]
        why = record.marker_problem(ev["holds"], vals) if vals else "not recorded"
        if why:
            problems.append(f"{stem} «{e['quote']}» {ev['record']} holds {ev['holds']}: {why}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stem", LESSONS)
def test_ledger_numbers_come_from_its_evidence(stem):
    problems = ledger_number_problems(stem)
    assert not problems, f"normlab/ledger/{stem}.toml:\n" + "\n".join(problems)


def test_the_evidence_page_is_the_ledger():
    assert ledger.PAGE.read_text(encoding="utf-8") == ledger.page(), \
        "book/evidence.md is out of date: python3 tools/ledger.py page"


# --- the checks catch what they are for (planted) -------------------------------------------------------

def test_a_planted_summary_bullet_without_an_entry_is_caught(tmp_path, monkeypatch):
    stem = "06_placement"
    src = (ledger.NOTEBOOKS / f"{stem}.md").read_text(encoding="utf-8")
    planted = src.replace("## 小结\n\n", "## 小结\n\n- Pre-LN 在任何宽度、任何学习率下都比 Post-LN 好。\n", 1)
    assert planted != src
    (tmp_path / f"{stem}.md").write_text(planted, encoding="utf-8")
    monkeypatch.setattr(ledger, "NOTEBOOKS", tmp_path)
    todo = ledger.missing(stem)
    assert [t for w, q, t in todo] == ["Pre-LN 在任何宽度、任何学习率下都比 Post-LN 好。"]
    assert "where = \"小结\"" in unmapped_message(stem, todo)


def test_a_planted_instructor_number_that_differs_from_its_record_is_caught():
    text = ledger.INSTRUCTOR.read_text(encoding="utf-8")
    line = "- 普通网络训练到 0.92–0.96<!--rec bare.plain_he_acc 0.92..0.96-->。\n"
    planted = text.replace("### 要纠正的误解\n\n", "### 要纠正的误解\n\n" + line, 1)     # into 01's section
    problems = marker_problems(instructor_markers(planted))
    assert any("01_residuals:bare.plain_he_acc 0.92..0.96" in p and "outside" in p for p in problems), problems
    assert unsourced_numbers("noisy BN 的层输入移动得多两千倍。") == [("两千倍", "noisy BN 的层输入移动得多两千倍")]
    assert not unsourced_numbers("移动得多 305–368<!--rec ics.noisy/bn_drift 305..368--> 倍。")
