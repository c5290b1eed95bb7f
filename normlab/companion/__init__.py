"""The source-material companion (notebook 09): the errata of the five documents [A]..[E], each with
the flawed code beside the measurement that corrects it, the claims of degree and where they are
measured, and the concordance from every document section to the course.

Layout: data in TOML files, code in one module per document.

    errata_A.toml .. errata_E.toml   the catalogue: what each document says, what is right, the fix,
                                     the course section (a label), our restatement of prose mistakes
    claims.toml, momentum.toml       claims of degree; each document's momentum convention
    sections.toml                    the one table of course section titles (label -> notebook, title)
    concordance.toml                 document headings -> course sections; the interview questions
    doc_a.py .. doc_e.py             each document's demos, beside the flawed functions they run
                                     (the formulas themselves come from normlab.variants / lessons)
    claims.py                        the claims measured here: bn_cost, timing_pitfalls,
                                     half_precision_stability
    errata.py, concordance.py        loading the data; the tables

    from normlab import companion
    companion.catalogue()              # index table: id, where, what it says, what is right, section
    companion.code("E3")               # the flawed code (source of the function the demo runs) and the fix
    d = companion.demo("E3", seed=3)   # the measurement; d.values["..."] are the key numbers
    companion.show("E3")               # both

``seed`` shifts every random stream of a demo (the notebook passes ``normlab.seed()``); the global
RNG is left as it was. Ids are "<document letter><number>" (A1, ..., E9; D4 became a claim).
"""

from . import concordance
from .base import Demo
from .claims import bn_cost, half_precision_stability, timing_pitfalls
from .doc_e import MOMENTUM_CONVENTIONS, momentum_table, momentum_traces
from .errata import CLAIMS, ERRATA, Claim, Erratum, catalogue, claims_table, code, demo, get, show

__all__ = ["concordance", "Demo", "Erratum", "Claim", "ERRATA", "CLAIMS", "MOMENTUM_CONVENTIONS", "get", "demo",
           "code", "show", "catalogue", "claims_table", "momentum_table", "momentum_traces", "bn_cost",
           "timing_pitfalls", "half_precision_stability"]
