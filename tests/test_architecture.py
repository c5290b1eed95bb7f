"""The package's shape, read from its source with ``ast`` (nothing is imported):

* the import graph between normlab modules has no cycle, function-local imports included
  (a local import can hide a cycle from Python, not from this test);
* each module imports only what its layer may (normlab/__init__.py describes the layers):
  core < cost < course < wings; core imports no cost, no course and no wing; the course layer
  (normlab/course/: the course machinery, issue 39) imports core only, and of the wings only widgets
  (the prompt widget) and classroom import it; lessons import no other lesson;
  widgets and companion import no drills and not each other; drills import nothing else of normlab;
  exercises import core, cost, lessons and, of drills, only normlab.drills.report; nothing imports exercises;
  classroom (the class service, issue 39) imports core and course only;
* no formula is written twice: no two function bodies are the same code up to local names.

The graph and the rules are plain functions of a folder, so the tests at the bottom plant each
kind of mistake in a throw-away package and check that it is caught.
"""

from __future__ import annotations

import ast
import textwrap
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "normlab"

COST = {"bench", "fused", "fused_kernel"}               # normlab/<name>.py: the cost layer
COURSE = "course"                                       # normlab/course/: between cost and the wings
WINGS = ("lessons", "widgets", "companion", "drills", "exercises", "classroom")   # normlab/<name>/: the wings
# Which layers a module of each layer may import (its own layer included where listed).
MAY_IMPORT = {
    "core": {"core"},
    "cost": {"core", "cost"},
    "course": {"core", "course"},                        # export, init/reset, the prompts, a learner's files
    "lessons": {"core", "cost", "lessons"},              # and within lessons only itself (below)
    "widgets": {"core", "cost", "course", "widgets"},    # predict.py: the prompts (normlab.course.predictions)
    "companion": {"core", "cost", "lessons", "companion"},
    "drills": {"drills"},
    "exercises": {"core", "cost", "lessons", "drills", "exercises"},   # of drills only DRILLS_FOR_EXERCISES
    "classroom": {"core", "course", "classroom"},        # the class service and its client (issue 39)
}
DRILLS_FOR_EXERCISES = {"normlab.drills.report"}   # Finding, Report, the guarded call
MIN_BODY_NODES = 12   # bodies smaller than this (`return x`, `pass`, one attribute) are not formulas


# ------------------------------------------------------------------------------- the import graph

@dataclass(frozen=True)
class Import:
    target: str      # the normlab module imported (a submodule where one is named, else the package)
    line: int
    local: bool      # inside a function body

    def where(self) -> str:
        return f"l.{self.line}" + (", inside a function" if self.local else "")


def modules_of(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of the package under ``root``: dotted name -> file (a package is its __init__.py)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: set[str]) -> str | None:
    """The module ``name`` names, or the longest known package above it (``normlab.seed`` -> ``normlab``)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def _base(module: str, is_package: bool, level: int) -> str:
    """The package a relative import of ``level`` dots starts from, inside ``module``."""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    return ".".join(parts[:len(parts) - (level - 1)] if level > 1 else parts)


class _ImportFinder(ast.NodeVisitor):
    """Every import statement of a module, function bodies included; `if TYPE_CHECKING:` blocks,
    which never run, excluded. Also importlib.import_module("literal") calls."""

    def __init__(self, module: str, is_package: bool, known: set[str], package: str):
        self.module, self.is_package, self.known, self.package = module, is_package, known, package
        self.depth, self.found = 0, []

    def _add(self, name: str | None, node: ast.AST) -> None:
        if name and (name == self.package or name.startswith(self.package + ".")):
            target = _resolve(name, self.known)
            if target and target != self.module:
                self.found.append(Import(target, node.lineno, self.depth > 0))

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node: ast.If):
        test = ast.unparse(node.test)
        if test in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import):
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom):
        if node.level:
            base = _base(self.module, self.is_package, node.level)
            source = f"{base}.{node.module}" if node.module else base
        else:
            source = node.module
        for alias in node.names:   # `from . import blocks` imports the module normlab.blocks
            sub = f"{source}.{alias.name}"
            self._add(sub if sub in self.known else source, node)

    def visit_Call(self, node: ast.Call):
        fn = ast.unparse(node.func)
        if fn in ("importlib.import_module", "import_module", "__import__") and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            name = node.args[0].value
            if name.startswith("."):
                level = len(name) - len(name.lstrip("."))
                rest = name.lstrip(".")
                base = _base(self.module, self.is_package, level)
                name = f"{base}.{rest}" if rest else base
            self._add(name, node)
        self.generic_visit(node)


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, list[Import]]:
    """module -> the package's modules it imports (every import statement, function-local ones too)."""
    mods = modules_of(root, package)
    known = set(mods)
    graph = {}
    for name, path in mods.items():
        finder = _ImportFinder(name, path.name == "__init__.py", known, package)
        finder.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        graph[name] = list(dict.fromkeys(finder.found))   # `from .x import a, b`: one edge
    return graph


def find_cycles(graph: dict[str, list[Import]]) -> list[str]:
    """One readable cycle per strongly connected component that has one:
    'a -> b (imported at a l.3) -> a (imported at b l.180, inside a function)'."""
    index, low, on_stack, stack, sccs, counter = {}, {}, set(), [], [], [0]

    def strongconnect(v):            # Tarjan; the graphs here are small, recursion is fine
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for imp in graph.get(v, []):
            w = imp.target
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(set(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    cycles = []
    for comp in sccs:
        start = min(comp)
        if len(comp) == 1 and not any(i.target == start for i in graph.get(start, [])):
            continue
        # shortest path from start back to start inside the component (breadth first)
        prev, frontier, seen = {}, [start], {start}
        while frontier and start not in prev:
            nxt = []
            for v in frontier:
                for imp in graph.get(v, []):
                    if imp.target in comp and (imp.target not in seen or imp.target == start) \
                            and imp.target not in prev:
                        prev[imp.target] = (v, imp)
                        seen.add(imp.target)
                        nxt.append(imp.target)
            frontier = nxt
        steps, v = [], start
        while True:
            u, imp = prev[v]
            steps.append(f"{v} (imported at {u} {imp.where()})")
            v = u
            if v == start:
                break
        cycles.append(" -> ".join([start] + steps[::-1]))
    return cycles


# ------------------------------------------------------------------------------- the layer rules

def subpackages(root: Path, package: str = PACKAGE) -> set[str]:
    return {m for m, path in modules_of(root, package).items() if path.name == "__init__.py" and "." in m}


def layer_of(module: str, packages: set[str] = frozenset()) -> str:
    """core, cost, course, one of WINGS, or "unknown" (a subpackage, or a module in one, that is no layer)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "core"                                  # the package's __init__.py
    if parts[1] in WINGS or parts[1] == COURSE:
        return parts[1]
    if len(parts) > 2 or module in packages:
        return "unknown"
    return "cost" if parts[1] in COST else "core"


def rule_violations(graph: dict[str, list[Import]], packages: set[str] = frozenset()) -> list[str]:
    """Each import a module's layer may not make, named with the line that makes it
    (``packages``: the subpackages, from ``subpackages(root)``)."""
    out = []
    for module, imports in sorted(graph.items()):
        layer = layer_of(module, packages)
        if layer == "unknown":
            out.append(f"{module}: in no layer (core, cost, {COURSE}, {', '.join(WINGS)}): add it to one")
            continue
        for imp in imports:
            target_layer = layer_of(imp.target, packages)
            if target_layer == "unknown":
                continue                               # reported for the module itself
            if target_layer not in MAY_IMPORT[layer]:
                out.append(f"{module} ({layer}) imports {imp.target} ({target_layer}), {imp.where()}")
            elif layer == "exercises" and target_layer == "drills" and imp.target not in DRILLS_FOR_EXERCISES:
                out.append(f"{module} (exercises) imports {imp.target}: of drills only "
                           f"{', '.join(sorted(DRILLS_FOR_EXERCISES))}, {imp.where()}")
            elif layer == "lessons" and target_layer == "lessons" and imp.target != module \
                    and module.count(".") == 2:
                out.append(f"{module} imports another lesson, {imp.target}, {imp.where()}")
    return out


# ------------------------------------------------------------------------------- the formula lint

class _LocalNames(ast.NodeTransformer):
    """Rename a function's arguments and the names it assigns to v0, v1, ... in order of first
    appearance; names it does not bind (torch, F, math) stay."""

    def __init__(self, bound: set[str]):
        self.bound, self.names = bound, {}

    def _new(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node: ast.Name):
        if node.id in self.bound:
            node.id = self._new(node.id)
        return node

    def visit_arg(self, node: ast.arg):
        node.arg = self._new(node.arg)
        node.annotation = None
        return node


def _bound_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = fn.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    names |= {x.arg for x in (a.vararg, a.kwarg) if x}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def body_key(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, int] | None:
    """The function's body as code, docstring dropped and local names normalised, with its size
    in AST nodes; None for a body that is no formula: too small, or without arithmetic (a
    constructor that passes other defaults on to ``super().__init__``, an ``extra_repr``)."""
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return None
    module = ast.Module(body=body, type_ignores=[])
    module = _LocalNames(_bound_names(fn)).visit(ast.parse(ast.unparse(module)))
    size = sum(1 for _ in ast.walk(module))
    if size < MIN_BODY_NODES or not any(isinstance(n, ast.BinOp | ast.AugAssign) for n in ast.walk(module)):
        return None
    return ast.dump(module, annotate_fields=False), size


def duplicate_bodies(root: Path, package: str = PACKAGE) -> list[str]:
    """Groups of functions whose bodies are the same code up to local names: 'a.f (l.3) = b.g (l.9)'.
    drills/ may not import the rest of the package, so a formula it shares with it is not a duplicate;
    a duplicate inside drills/ is."""
    seen = defaultdict(list)
    for module, path in modules_of(root, package).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                key = body_key(node)
                if key:
                    seen[key[0]].append((module, node.name, node.lineno))
    out = []
    for defs in seen.values():
        groups = defaultdict(list)
        for d in defs:
            groups[layer_of(d[0]) == "drills"].append(d)
        for group in groups.values():
            if len(group) > 1:
                out.append(" = ".join(f"{m}.{f} (l.{line})" for m, f, line in sorted(group)))
    return sorted(out)


# ------------------------------------------------------------------------------- the tests

def test_normlab_has_no_import_cycle():
    cycles = find_cycles(import_graph(ROOT))
    assert not cycles, "import cycles (function-local imports included):\n  " + "\n  ".join(cycles)


def test_each_layer_imports_only_what_it_may():
    bad = rule_violations(import_graph(ROOT), subpackages(ROOT))
    assert not bad, "imports across the layers (see normlab/__init__.py):\n  " + "\n  ".join(bad)


def test_no_formula_is_written_twice():
    dups = duplicate_bodies(ROOT)
    assert not dups, ("formulas written twice (function bodies with arithmetic, the same code up to local "
                      "names): keep one, import it where the other was\n  " + "\n  ".join(dups))


def test_the_graph_sees_the_real_package():
    graph = import_graph(ROOT)
    assert {"normlab", "normlab.norms", "normlab.drills", "normlab.drills.checks", "normlab.bench",
            "normlab.course", "normlab.course.predictions"} <= set(graph)
    assert layer_of("normlab.course.predictions") == layer_of("normlab.course") == "course"
    assert any(i.target == "normlab.course.predictions" for i in graph["normlab.widgets.predict"])
    assert Import("normlab.env", graph["normlab"][0].line, True) in graph["normlab"]   # __init__.__getattr__: from . import env
    assert any(i.target == "normlab.fused_kernel" and i.local for i in graph["normlab.fused"])
    assert any(i.target == "normlab.drills.report" for i in graph["normlab.drills"])


# --- the checks can fail: each mistake planted in a throw-away package ------------------------------

def plant(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_a_cycle_hidden_by_a_function_local_import_is_found(tmp_path):
    root = plant(tmp_path, {
        "normlab/__init__.py": "from .env import seed\n",
        "normlab/env.py": "def seed():\n    return 0\n",
        "normlab/models.py": "from . import blocks\n",
        "normlab/blocks.py": "import torch\n\ndef make():\n    from normlab.lessons.deepnorm import ALPHA\n    return ALPHA\n",
        "normlab/lessons/__init__.py": "",
        "normlab/lessons/deepnorm.py": "from ..models import Net\nALPHA = 1\n",
    })
    graph = import_graph(root)
    assert graph["normlab.blocks"] == [Import("normlab.lessons.deepnorm", 4, True)]
    assert graph["normlab.lessons.deepnorm"] == [Import("normlab.models", 1, False)]
    cycles = find_cycles(graph)
    assert len(cycles) == 1
    assert set(cycles[0].split(" ")) >= {"normlab.blocks", "normlab.lessons.deepnorm", "normlab.models"}
    assert "inside a function" in cycles[0]
    (root / "normlab" / "lessons" / "deepnorm.py").write_text("ALPHA = 1\n", encoding="utf-8")   # break it: no cycle
    assert find_cycles(import_graph(root)) == []


def test_a_module_importing_its_own_package_init_back_is_a_cycle(tmp_path):
    root = plant(tmp_path, {"normlab/__init__.py": "from .viz import Table\nSEED = 0\n",
                            "normlab/viz.py": "from normlab import SEED\nTable = list\n"})
    assert find_cycles(import_graph(root)) == [
        "normlab -> normlab.viz (imported at normlab l.1) -> normlab (imported at normlab.viz l.1)"]


@pytest.mark.parametrize("local", ["from normlab import companion", "import normlab.companion as c",
                                   "from .. import companion", "from . import *"])
def test_a_function_local_import_of_the_parent_package_is_a_cycle(tmp_path, local):
    """A wing's module that imports its own package inside a function (normlab/companion/errata.py once
    did: `from normlab import companion`) while the package's __init__ imports that module: a cycle,
    named with the line and "inside a function"; the same import of a sibling module is none."""
    files = {"normlab/__init__.py": "", "normlab/companion/__init__.py": "from .errata import show\n",
             "normlab/companion/base.py": "X = 1\n",
             "normlab/companion/errata.py": f"def show():\n    {local}\n    return 1\n"}
    cycles = find_cycles(import_graph(plant(tmp_path, files)))
    assert cycles == ["normlab.companion -> normlab.companion.errata (imported at normlab.companion l.1) -> "
                      "normlab.companion (imported at normlab.companion.errata l.2, inside a function)"]
    (tmp_path / "normlab" / "companion" / "errata.py").write_text(
        "def show():\n    from . import base\n    return base.X\n", encoding="utf-8")
    assert find_cycles(import_graph(tmp_path)) == []


def test_the_companion_does_not_import_itself_back():
    """No module of normlab/companion imports the companion package (`normlab.companion`) at all."""
    graph = import_graph(ROOT)
    back = [f"{m} {i.where()}" for m, imports in graph.items() if m.startswith("normlab.companion.")
            for i in imports if i.target == "normlab.companion"]
    assert not back, back


TOOLS_MAX_LINES = 400   # tools/: each file one job, short enough to read (issue 27)


def test_no_tool_is_longer_than_it_can_be_read():
    long = {p.name: n for p in sorted((ROOT / "tools").glob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > TOOLS_MAX_LINES}
    assert not long, f"tools/ files over {TOOLS_MAX_LINES} lines (split them by job): {long}"


def test_each_layer_rule_catches_its_mistake(tmp_path):
    root = plant(tmp_path, {
        "normlab/__init__.py": "",
        "normlab/norms.py": "def f():\n    from .widgets import explorer\n",                 # core -> wing
        "normlab/train.py": "from normlab.bench import timeit\n",                             # core -> cost
        "normlab/bench.py": "from .lessons import residuals\n",                              # cost -> wing
        "normlab/lessons/__init__.py": "",
        "normlab/lessons/residuals.py": "from . import batchnorm\nfrom .. import norms\n",   # lesson -> lesson
        "normlab/lessons/batchnorm.py": "from normlab.drills import check\n",                # lesson -> drills
        "normlab/widgets/__init__.py": "",
        "normlab/widgets/explorer.py": "from ..companion import errata\n",                   # widget -> companion
        "normlab/companion/__init__.py": "",
        "normlab/companion/errata.py": "from normlab.lessons import residuals\nimport normlab.drills.report\n",
        "normlab/drills/__init__.py": "from .report import check\n",
        "normlab/drills/report.py": "def check():\n    import normlab.norms\n",               # drills -> core
        "normlab/extra/__init__.py": "",                                                     # no layer
        "normlab/exercises/__init__.py": "from . import base\n",
        "normlab/exercises/base.py": "from ..drills.report import Finding\nfrom ..lessons import residuals\n"
                                     "from normlab.drills import checks\n",                 # exercises -> drills.checks
        "normlab/drills/checks.py": "X = 1\n",
        "normlab/lessons/layernorm.py": "from ..exercises import base\n",                  # lesson -> exercises
        "normlab/classroom/__init__.py": "",
        "normlab/classroom/client.py": "from ..widgets import explorer\nfrom .. import norms\n"
                                       "from ..course import predictions\n",           # classroom -> widgets
        "normlab/record.py": "from .course import predictions\n",                         # core -> course
        "normlab/fused.py": "def load():\n    import normlab.course\n",                  # cost -> course
        "normlab/course/__init__.py": "from . import predictions\n",
        "normlab/course/predictions.py": "from ..widgets import explorer\nfrom .. import norms\n",  # course -> wing
        "normlab/lessons/warmup.py": "from normlab.course.predictions import entry\n",     # lesson -> course
        "normlab/widgets/predict.py": "from ..course import predictions\n",               # widget -> course: allowed
    })
    bad = rule_violations(import_graph(root), subpackages(root))
    expected = [
        "normlab.bench (cost) imports normlab.lessons.residuals (lessons), l.1",
        "normlab.classroom.client (classroom) imports normlab.widgets.explorer (widgets), l.1",
        "normlab.companion.errata (companion) imports normlab.drills.report (drills), l.2",
        "normlab.course.predictions (course) imports normlab.widgets.explorer (widgets), l.1",
        "normlab.drills.report (drills) imports normlab.norms (core), l.2, inside a function",
        "normlab.exercises.base (exercises) imports normlab.drills.checks: of drills only normlab.drills.report, l.3",
        "normlab.extra: in no layer (core, cost, course, lessons, widgets, companion, drills, exercises, classroom): "
        "add it to one",
        "normlab.fused (cost) imports normlab.course (course), l.2, inside a function",
        "normlab.lessons.batchnorm (lessons) imports normlab.drills (drills), l.1",
        "normlab.lessons.layernorm (lessons) imports normlab.exercises.base (exercises), l.1",
        "normlab.lessons.residuals imports another lesson, normlab.lessons.batchnorm, l.1",
        "normlab.lessons.warmup (lessons) imports normlab.course.predictions (course), l.1",
        "normlab.norms (core) imports normlab.widgets.explorer (widgets), l.2, inside a function",
        "normlab.record (core) imports normlab.course.predictions (course), l.1",
        "normlab.train (core) imports normlab.bench (cost), l.1",
        "normlab.widgets.explorer (widgets) imports normlab.companion.errata (companion), l.1",
    ]
    assert bad == expected
    # what is allowed raises nothing: companion -> lessons, lessons -> core, drills -> drills
    assert not any("companion.errata (companion) imports normlab.lessons" in b for b in bad)
    assert not any(b.startswith("normlab.drills (drills)") for b in bad)
    assert not any(b.startswith("normlab.exercises (exercises)") for b in bad)   # exercises -> its own base
    assert not any("imports normlab.drills.report: of drills only" in b for b in bad)   # the one allowed drills module
    # the course layer: widgets and classroom may import it, it may import the core
    assert not any(b.startswith(("normlab.widgets.predict", "normlab.course (course)")) for b in bad)
    assert not any("classroom.client (classroom) imports normlab.course" in b for b in bad)
    assert not any("course.predictions (course) imports normlab.norms" in b for b in bad)


def test_the_same_formula_under_other_names_is_found(tmp_path):
    root = plant(tmp_path, {
        "normlab/__init__.py": "",
        "normlab/variants.py": '''
            import torch

            def rms_norm(x, weight=None, eps=1e-6):
                """x / RMS(x)."""
                y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
                return y if weight is None else y * weight
            ''',
        "normlab/companion/__init__.py": "",
        "normlab/companion/errata.py": '''
            import torch

            def t5_norm(h, w=None, epsilon=1e-5):
                out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + epsilon)
                return out if w is None else out * w

            def layer_norm(h, w=None, epsilon=1e-5):   # a different formula: the mean is subtracted
                out = (h - h.mean(-1, keepdim=True)) * torch.rsqrt(h.var(-1, keepdim=True) + epsilon)
                return out if w is None else out * w

            def identity(x):
                return x

            def describe(self):                        # the same in two classes, but no formula
                return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.affine}"

            def describe_again(self):
                return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.affine}"
            ''',
        "normlab/drills/__init__.py": "",
        "normlab/drills/checks.py": '''
            import torch

            def reference_rms(x, weight=None, eps=1e-6):   # drills may not import variants: allowed
                y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
                return y if weight is None else y * weight
            ''',
    })
    assert duplicate_bodies(root) == ["normlab.companion.errata.t5_norm (l.4) = normlab.variants.rms_norm (l.4)"]
