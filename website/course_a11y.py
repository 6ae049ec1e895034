"""Sphinx extension of the course's website: what the theme and MyST-NB write, made accessible at the source.

tools/site.py copies it beside conf.py (build/site-src), which loads it after myst_nb. It changes three
things in the HTML that Sphinx writes (README, "Accessibility"):
- every figure a notebook's output draws gets the description stored with that output,
  ``output.metadata["image/png"]["alt"]`` (mllm_utils.figures.show writes it), as its ``alt``: MyST-NB 1.4
  reads only width and height from there, and docutils otherwise writes the image's file name;
- the navigation captions ("Notebooks", "Teaching") are headings with a level (Sphinx writes
  ``role="heading"`` with none);
- the toggles of folded cells ("Show a solution") are named by their visible text: MyST-NB names them
  "Toggle hidden content" with aria-label, which a speech-input user cannot say, since it is not shown.

The pure part, :func:`figure_alts`, is what tools/site.py also uses to fail the build on a figure with no
description (tests/test_site.py checks it without Sphinx).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from html import escape
from pathlib import Path

# Shorter than this is not a description (mllm_utils.figures.MIN_ALT_CHARS: the same rule in the notebooks).
MIN_ALT_CHARS = 20
IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif", "image/svg+xml")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
HASHED_IMAGE = re.compile(r"([0-9a-f]{64})\.\w+$")  # MyST-NB names an output's image by its bytes' SHA-256
NAV_HEADING_LEVEL = "2"  # the navigation's captions sit under the site's title, beside the page's own h1


def alt_problem(alt) -> str | None:
    """Why `alt` is not a description of a figure (None when it is one): missing, too short, a file name."""
    if alt is None:
        return "no description"
    if not isinstance(alt, str):
        return f"a description that is not text ({type(alt).__name__})"
    text = " ".join(alt.split())
    if re.search(r"(^|[/\\])[\w.-]+\.(png|jpe?g|gif|svg)$", text, re.IGNORECASE) or text.startswith("data:"):
        return f"a file name as its description ({text[:60]!r})"
    if len(text) < MIN_ALT_CHARS:
        return f"a description of {len(text)} characters ({text!r}), under {MIN_ALT_CHARS}: say what the figure shows"
    return None


def _image_bytes(mime: str, content) -> bytes | None:
    text = "".join(content) if isinstance(content, list) else content
    if not isinstance(text, str):
        return None
    if mime == "image/svg+xml":
        return "\n".join(text.splitlines()).encode("utf-8")  # as MyST-NB writes it (os.linesep on Linux)
    try:
        return base64.b64decode(text)
    except (binascii.Error, ValueError):
        return None


def _output_alt(output: dict):
    """The description an output stores with its image: metadata[mime]["alt"], for any image type it holds."""
    metadata = output.get("metadata") or {}
    for mime in IMAGE_MIMES:
        entry = metadata.get(mime)
        if isinstance(entry, dict) and entry.get("alt") is not None:
            return entry["alt"]
    return None


def _output_images(output: dict) -> list[tuple[str, bytes]]:
    data = output.get("data") or {}
    found = []
    for mime in IMAGE_MIMES:
        if mime in data:
            raw = _image_bytes(mime, data[mime])
            if raw is not None:
                found.append((mime, raw))
    return found


def figure_alts(nb: dict, name: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The figures a notebook shows, and what is wrong with their descriptions.

    Returns ([(sha256 of the image's bytes, its alt)], problems), the figures in the order of the cells.
    A figure is an image in a cell's output, or in the saved state of an Output widget (drawn on the site
    by the widget manager). Each problem names the notebook, the cell (its number from 1, and its id) and
    the output, so that the one who writes the notebook finds it.
    """
    found, problems = [], []
    for number, cell in enumerate(nb.get("cells", []), start=1):
        for k, output in enumerate(cell.get("outputs", []) or [], start=1):
            images = _output_images(output)
            if not images:
                continue
            alt = _output_alt(output)
            problem = alt_problem(alt)
            if problem:
                problems.append(f"{name}, cell {number} (id {cell.get('id', '?')}), output {k}: a figure with "
                                f"{problem}; show it with mllm_utils.figures.show(fig, alt=...)")
                continue
            text = " ".join(alt.split())
            found += [(hashlib.sha256(raw).hexdigest(), text) for _, raw in images]
    widgets = (nb.get("metadata", {}).get("widgets", {}) or {}).get(WIDGET_STATE, {}).get("state", {}) or {}
    for model_id, model in widgets.items():
        for k, output in enumerate((model.get("state") or {}).get("outputs", []) or [], start=1):
            if not _output_images(output):
                continue
            problem = alt_problem(_output_alt(output))
            if problem:
                where = widget_cell(nb, model_id, widgets)
                problems.append(f"{name}, {where}, the saved state of Output widget {model_id[:8]}, output {k}: "
                                f"a figure with {problem}; show it with mllm_utils.figures.show(fig, alt=...) "
                                "inside the widget")
    return found, problems


def widget_cell(nb: dict, model_id: str, state: dict) -> str:
    """'cell N (id ...)': the cell whose output displays the widget (or a widget that holds it)."""
    parents = {child.split("IPY_MODEL_", 1)[1]: mid for mid, m in state.items()
               for child in (m.get("state") or {}).get("children", []) or []
               if isinstance(child, str) and child.startswith("IPY_MODEL_")}
    ids = [model_id]
    while ids[-1] in parents and len(ids) < 50:
        ids.append(parents[ids[-1]])
    for number, cell in enumerate(nb.get("cells", []), start=1):
        for output in cell.get("outputs", []) or []:
            view = (output.get("data") or {}).get("application/vnd.jupyter.widget-view+json") or {}
            if view.get("model_id") in ids:
                return f"cell {number} (id {cell.get('id', '?')})"
    return "no cell displays it"


# --- Sphinx -------------------------------------------------------------------------------------------------

def _set_figure_alts(app, doctree) -> None:
    """doctree-read: each output image of a notebook page gets its output's description as its alt."""
    from docutils import nodes

    source = Path(app.env.doc2path(app.env.docname))
    if source.suffix != ".ipynb":
        return
    found, _ = figure_alts(json.loads(source.read_text("utf-8")), source.name)
    queues: dict[str, list[str]] = {}
    for digest, alt in found:
        queues.setdefault(digest, []).append(alt)
    for image in doctree.findall(nodes.image):
        match = HASHED_IMAGE.search(image.get("uri", ""))
        queue = queues.get(match.group(1)) if match else None
        if queue:
            image["alt"] = queue.pop(0) if len(queue) > 1 else queue[0]
    # A figure with no description keeps none here: tools/site.py fails the build on it, and the site test
    # on any image whose alt is its file name.


def _visit_folded_cell(self, node) -> None:
    """MyST-NB's folded cell, its <summary> named by the words it shows (no aria-label)."""
    classes = " ".join(node["classes"])
    self.body.append(f'<details class="admonition hide {classes}">\n<summary>\n')
    self.body.append(f'<p class="collapsed admonition-title">{escape(node["prompt_show"])}</p>\n')
    self.body.append(f'<p class="expanded admonition-title">{escape(node["prompt_hide"])}</p>\n')
    self.body.append("</summary>\n")


def translator_class(base):
    """The HTML translator, with the toctree captions as headings of a level."""
    from sphinx import addnodes

    class CourseTranslator(base):
        def visit_title(self, node) -> None:
            if isinstance(node.parent, addnodes.compact_paragraph) and node.parent.get("toctree"):
                self.body.append(self.starttag(node, "p", "", CLASS="caption", ROLE="heading",
                                               **{"aria-level": NAV_HEADING_LEVEL}))
                self.body.append('<span class="caption-text">')
                self.context.append("</span></p>\n")
            else:
                super().visit_title(node)

    return CourseTranslator


def setup(app):
    from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput
    from sphinx.writers.html5 import HTML5Translator

    app.add_node(HideCodeCellNode, override=True, html=(_visit_folded_cell, depart_HideCellInput))
    app.set_translator("html", translator_class(HTML5Translator), override=True)
    app.connect("doctree-read", _set_figure_alts)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
