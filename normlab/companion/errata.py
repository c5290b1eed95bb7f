"""The errata catalogue: the data of errata_A.toml .. errata_E.toml joined to the demos of
doc_a.py .. doc_e.py, and the claims of degree of claims.toml.

    code("E3")             the flawed code: the function the demo runs (its source), or our few-line
                           restatement where the mistake is prose; the fix under it
    demo("E3", seed=3)     run the measurement that corrects it; .values holds the key numbers
    show("E3")             both, printed (or displayed in a notebook)
    catalogue("C")         the index table; claims_table(): the claims of degree and where they are measured
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

from ..viz import Table
from . import doc_a, doc_b, doc_c, doc_d, doc_e  # noqa: F401  (each registers its demos with @corrects)
from .base import DEMOS, FLAWED, Demo, load_toml, seeded
from .concordance import InCourse

__all__ = ["Erratum", "Claim", "ERRATA", "CLAIMS", "get", "demo", "code", "show", "catalogue", "claims_table"]

DOCUMENTS = "ABCDE"


@dataclass(frozen=True)
class Erratum(InCourse):
    id: str                 # "E3"
    doc: str                # "E"
    section: str            # the document's own numbering or heading, e.g. "§1.2"
    kind: str               # 公式 formula / 代码 code / 出处 attribution / 说法 claim / 补充 note (not wrong: what it leaves out)
    says: str               # what the document says, in our own words
    right: str              # what is right, with the source
    course: str             # label of the course section that covers it (concordance.SECTIONS)
    fix: str                # the correction, one or two lines (printed as a comment under the code)
    snippet: str = ""       # our restatement of a prose or pseudo-code mistake ("" where the code is runnable)
    run: Callable[[], Demo] = field(repr=False, compare=False, default=None)
    flawed: tuple[Callable, ...] = field(repr=False, compare=False, default=())
    records: list = field(default_factory=list, compare=False, repr=False)   # where its numbers come from


def _load() -> list[Erratum]:
    out = []
    for doc in DOCUMENTS:
        data = load_toml(f"errata_{doc}.toml")
        if data["document"] != doc:
            raise ValueError(f"errata_{doc}.toml says document = {data['document']!r}")
        for e in data["erratum"]:
            out.append(Erratum(doc=doc, run=DEMOS[e["id"]], flawed=FLAWED[e["id"]], **e))
    missing = set(DEMOS) - {e.id for e in out}
    if missing:
        raise ValueError(f"demos without an erratum in the TOML files: {sorted(missing)}")
    return out


ERRATA: list[Erratum] = _load()
_BY_ID = {e.id: e for e in ERRATA}


@dataclass(frozen=True)
class Claim(InCourse):
    where: str              # the document and its section
    says: str               # the claim, in our words
    verdict: str            # what the measurement says, with the source
    course: str             # label of the course section that measures it
    measured_by: str = ""   # the function of normlab.companion that measures it here ("" if a lesson does)
    # where its numbers come from (tests/test_ledger.py): record ranges "NN_name:key lo..hi", or the arithmetic
    records: list = field(default_factory=list, compare=False, repr=False)
    derived: list = field(default_factory=list, compare=False, repr=False)


CLAIMS: list[Claim] = [Claim(**c) for c in load_toml("claims.toml")["claim"]]


def get(erratum_id: str) -> Erratum:
    """The erratum with this id (e.g. "E3")."""
    if erratum_id not in _BY_ID:
        raise KeyError(f"没有编号为 {erratum_id!r} 的勘误 (no erratum with this id)；可用的编号：{', '.join(_BY_ID)}。")
    return _BY_ID[erratum_id]


def demo(erratum_id: str, seed: int = 0) -> Demo:
    """Run the demonstration of one erratum with ``seed`` and return its table and numbers."""
    e = get(erratum_id)
    with seeded(seed):
        return e.run()


def _source(fn: Callable) -> str:
    where = f"# {fn.__module__}.{fn.__qualname__}"
    return where + "\n" + textwrap.dedent(inspect.getsource(fn)).rstrip()


@dataclass(frozen=True)
class Code:
    """An erratum's flawed code as text: shown as Markdown in a notebook, as plain text elsewhere."""
    head: str
    body: str

    def __str__(self) -> str:
        return f"{self.head}\n\n{self.body}"

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        return f"{self.head}\n\n```python\n{self.body}\n```"


def code(erratum_id: str) -> Code:
    """The flawed code of one erratum: the source of the function(s) its demo runs (inspect.getsource),
    or, where the mistake is prose or pseudo-code, our few-line restatement; then the fix."""
    e = get(erratum_id)
    parts = [e.snippet.rstrip()] if e.snippet else []
    parts += [_source(fn) for fn in e.flawed]
    fix = "\n".join(("# fix: " if i == 0 else "#      ") + line for i, line in enumerate(e.fix.splitlines()))
    head = f"**{e.id}** · [{e.doc}] {e.section}：资料的写法（我们的代码）→ 课程：{e.place}"
    return Code(head, "\n\n".join(parts + [fix]))


def show(erratum_id: str, seed: int = 0) -> Demo:
    """The erratum's flawed code, then its measurement with ``seed``; displayed in a notebook,
    printed elsewhere. Returns the Demo (its ``values`` are the numbers)."""
    c, d = code(erratum_id), demo(erratum_id, seed=seed)
    try:
        from IPython import get_ipython
        from IPython.display import display
        if get_ipython() is None:
            raise ImportError
        display(c, d)
    except ImportError:
        print(c, "", d, sep="\n")
    return d


def catalogue(doc: str | None = None) -> Table:
    """The index of errata: id, where, kind, what the document says, what is right, course section."""
    if doc is not None and doc not in DOCUMENTS:
        raise ValueError(f"doc 应为 'A'..'E' 之一 (expected one of A-E)，实际收到 {doc!r}。")
    rows = [[e.id, f"[{e.doc}] {e.section}", e.kind, e.says, e.right, str(e.place)]
            for e in ERRATA if doc is None or e.doc == doc]
    return Table(rows, ["编号", "位置", "类型", "资料的说法（转述）", "正确的是", "课程章节"],
                 title="勘误索引 (errata)" + (f"：[{doc}]" if doc else ""))


def claims_table() -> Table:
    """Claims of degree, with the course section that measures them."""
    rows = [[c.where, c.says, c.verdict + (f"测量：companion.{c.measured_by}()" if c.measured_by else ""),
             str(c.place)] for c in CLAIMS]
    return Table(rows, ["位置", "资料的说法（转述）", "测量结论", "在哪里测"], title="程度性说法：在哪里测量")
