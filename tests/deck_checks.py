"""Checks over every slide of a reveal.js deck, several in one walk (issue 27: a walk over a deck costs
its slide changes, 10-20 ms each; three checks used to walk each deck three times).

A check is a JavaScript factory ``(args, R) => ({before(s, h, v), after(s, h, v), done()})``: for each
leaf slide ``s`` (indices h, v) ``before`` runs with none of its fragments shown, ``after`` with all of
them shown (either may be absent; ``after`` may be async), and ``done`` returns the check's result once
every slide was seen. Each leaves the slide as it found it (what it opens, it closes).

During the walk the deck writes no URL (reveal.js's ``history`` and ``hash`` off, then put back): with
them on, every slide change is a same-document navigation that the browser process records and reports
to Playwright, which cost more CPU than the checks themselves (03's walk: 4.3 s of CPU with it, 1.3 s
without; issue 27). What the checks read, the slide's layout and what shows, does not depend on the URL.
"""

from __future__ import annotations


def deck_pass(*checks: str) -> str:
    """A function for page.evaluate(..., [args of each check]) that walks the deck once, runs the checks
    on each slide in the order given, puts the deck back on its first slide, and returns their results."""
    return ("async (args) => {\n"
            "  const R = require('vendor/reveal.js/dist/reveal.js');\n"
            "  const kept = {history: R.getConfig().history, hash: R.getConfig().hash};\n"
            "  R.configure({history: false, hash: false});   // the walk writes no URL (see the docstring)\n"
            f"  const checks = [{', '.join(checks)}].map((make, i) => make(args[i], R));\n"
            "  const leaves = Array.from(document.querySelectorAll('.reveal .slides section')).filter(s => !s.querySelector('section'));\n"
            "  for (const s of leaves) {\n"
            "    const {h, v} = R.getIndices(s);\n"
            "    R.slide(h, v, -1);\n"
            "    for (const c of checks) if (c.before) c.before(s, h, v);\n"
            "    if (s.querySelector('.fragment')) R.slide(h, v, 1000);   // else all of it is shown already\n"
            "    for (const c of checks) if (c.after) await c.after(s, h, v);\n"
            "  }\n"
            "  R.slide(0, 0, -1);\n"
            "  R.configure(kept);\n"
            "  return checks.map(c => c.done());\n"
            "}")
