"""The slides' CSS (1280x720, readable when projected): font sizes, figures, code, outputs, answers.
Read from the back of a room (issue 28 item 10): tables, code and text outputs at 20px or more, a
widget's labels at 18px or more (tests/test_slides_readable.py measures the computed sizes).

The layout's px model (tools/slide_model.py: PROSE_LINE, CODE_LINE, CODE_CHAR, OUTPUT_MAX, ...) is measured
with these sizes: a change of a font size here needs the same change there (tests/test_browser_book.py
checks the decks in Chromium against the model)."""

# Nothing cut at the slide's right edge (tests/test_browser_book.py measures it): code wraps, a line's
# rows after the first CODE_HANG columns right of its indent (wrap_code_lines; 20px: issue 28 item 10);
# an output's box, its padding included, stays within its cell and scrolls sideways when it is wider
# (a table; its scrollbars always show); prose breaks a run it could not break otherwise (`"a"`、`"b"`).
SLIDE_FIT_CSS = """
.reveal div.highlight > pre { box-sizing: border-box; width: 100%; font-size: 20px; white-space: pre-wrap; overflow-wrap: anywhere; }
.reveal div.highlight > pre > .nl-line { display: block; padding-left: var(--nl-hang); text-indent: calc(-1 * var(--nl-hang)); }
.reveal .jp-OutputArea-output { box-sizing: border-box; }
.reveal .jp-OutputArea-output::-webkit-scrollbar { width: 10px; height: 10px; }
.reveal .jp-OutputArea-output::-webkit-scrollbar-thumb { background: #bbb; border-radius: 5px; }
.reveal .jp-MarkdownCell .jp-RenderedHTMLCommon { overflow-wrap: anywhere; }
"""


# Readable when projected: larger text, figures fill the width, code stays compact.
SLIDE_CSS = """
.reveal .slides { text-align: left; }
.reveal .jp-RenderedHTMLCommon, .reveal .jp-RenderedHTMLCommon p, .reveal .jp-RenderedHTMLCommon li { font-size: 28px; line-height: 1.45; }
.reveal h1, .reveal h2, .reveal h3, .reveal h4 { text-transform: none; }
.reveal .jp-RenderedHTMLCommon h1 { font-size: 48px; } .reveal .jp-RenderedHTMLCommon h2 { font-size: 40px; }
.reveal .jp-RenderedHTMLCommon h3 { font-size: 34px; }
.reveal .jp-RenderedHTMLCommon h4 { font-size: 24px; color: #666; margin: 0 0 8px 0; }
.reveal .jp-RenderedHTMLCommon table { font-size: 22px; }
.reveal .jp-RenderedHTMLCommon td, .reveal .jp-RenderedHTMLCommon th { font-size: 22px; }
.reveal blockquote { width: auto; margin: 8px 0; padding: 4px 16px; font-style: normal; box-shadow: none;
  background: #fff8f0; border-left: 5px solid #e65100; }
.reveal .jp-RenderedImage img { width: 95%; max-height: 500px; object-fit: contain; }
.reveal .jp-InputArea pre, .reveal .highlight pre, .reveal .jp-OutputArea pre, .reveal div.jp-OutputArea-output > pre { font-size: 20px; line-height: 1.3; }
.reveal .jp-OutputArea-child, .reveal .jp-OutputArea-output { display: block; }
.reveal .jp-OutputArea-output { max-height: 440px; overflow: auto; }
.reveal .jp-OutputArea-output.jp-RenderedHTMLCommon, .reveal .jp-OutputArea-output.jp-RenderedHTMLCommon p,
.reveal .jp-OutputArea-output.jp-RenderedHTMLCommon li { font-size: 20px; line-height: 1.4; }
.reveal .jp-OutputArea-output table, .reveal .jp-OutputArea-output td, .reveal .jp-OutputArea-output th { font-size: 20px; line-height: 1.4; }
.reveal .jp-OutputArea-output:has(.normlab-web) { max-height: none; overflow: visible; }
.reveal .jp-OutputArea-output:has(> table:only-child) { max-height: 560px; }   /* a table alone: slide_model.TABLE_MAX */
.reveal .jp-OutputArea-output.jp-RenderedImage { max-height: none; overflow: visible; }   /* a figure is never cut */
.reveal .normlab-web, .reveal .normlab-web select, .reveal .normlab-web label { font-size: 20px; }
/* a widget's own text (labels, values, captions, notes; not its SVG plot) at least 18px from the back of a room */
.reveal .normlab-web *:not(svg, svg *) { font-size: 18px !important; line-height: 1.25; }
/* the prediction summary is a table: 20px like every other table on a slide */
.reveal .normlab-web .nl-pr-table :is(th, td, td *) { font-size: 20px !important; line-height: 1.3; }
.reveal pre.normlab-progress { font-size: 20px; line-height: 1.25; color: #2e7d32; }
.reveal .slides section .fragment { transition: none; }
.reveal details { border-left: 4px solid #2e7d32; padding-left: 12px; }
.reveal details > summary { cursor: pointer; color: #2e7d32; }
.reveal .jp-RenderedHTMLCommon details p, .reveal .jp-RenderedHTMLCommon details li { font-size: 23px; line-height: 1.4; }
""" + SLIDE_FIT_CSS
