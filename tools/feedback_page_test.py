"""Browser test of the feedback page a graded student reads (mllm_classroom.reports.feedback_page).

A page of the sample class's kind (notebook 03's exercises, by their tasks), with the longest messages the checks
write: a named mistake, where the values first differ, an error inside the answer with the learner's line, a word
longer than a phone's width, a hidden test. In Debian's Chromium, through Playwright:
- reflow (WCAG 1.4.10): at 320 CSS px nothing scrolls sideways (document.documentElement.scrollWidth <= 320), in
  the light and the dark scheme and printed;
- axe-core's WCAG 2.0/2.1 A and AA rules at 320 and 1,280 px, and its colour rules again in the dark scheme;
- screenshots at 320 and 1,280 px (light and dark) in the artifacts folder.

`tools/site_test.py` runs it (`make test-site`, which CI runs); alone: `python tools/feedback_page_test.py`
(after tools/browser-setup.sh VENV and `make site-setup`, which brings axe-core).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.browser_test import CHROMIUM, CHROMIUM_ARGS, missing_tools  # noqa: E402

NARROW_PX, WIDE_PX = 320, 1280
NOTEBOOK = "03_recurrent_networks"
# In the page: how wide the document is, against the window (any overflow means sideways scrolling).
JS_WIDTHS = "() => ({scroll: document.documentElement.scrollWidth, window: window.innerWidth})"


def sample_page() -> str:
    """The feedback page of a student who passed one exercise and failed the others in every way a page shows."""
    import nbformat

    from mllm_classroom.lessons import exercises
    from mllm_classroom.reports import feedback_page

    lesson = nbformat.read(ROOT / "notebooks" / f"{NOTEBOOK}.ipynb", as_version=4)
    found = exercises(lesson)
    # One exercise passed and one per kind of message: more than the lesson has, numbered on from its own.
    while len(found) < 5:
        found.append(types.SimpleNamespace(name=f"ex{len(found) + 1}", grade_id=f"ex{len(found) + 1}-check",
                                           points=1.0))
    long_word = "states_" + "x" * 90  # longer than 320 px in any font: it must wrap, not scroll
    verdicts = [
        {"part": "visible", "kind": "check", "name": "relu_rnn_forward(x, weights_of(rnn))",
         "problem": "this is what a known mistake gives: each layer starts from the state the layer below ended "
                    "with, not from a zero state", "expected": "a tensor of shape (5, 3, 4), dtype torch.float32, "
                    "first values [0, 0.1224, 0.0372, 0, 0.3391, 0.04175, ...]", "hint": ""},
        {"part": "visible", "kind": "check", "name": "teacher_forcing_pairs(sentences)",
         "problem": "not the expected value", "expected": f"{long_word} of shape (100,), dtype torch.int64",
         "hint": "things to check: the inputs are every token but the last, the targets every token but the first"},
        {"part": "visible", "kind": "check", "name": "two_layer_forward(x, rnn2)",
         "problem": "raised RuntimeError: Sizes of tensors must match except in dimension 0. Expected size 4 but "
                    "got size 3 for tensor number 1 in the list.", "expected": "a result, without an error",
         "hint": ""},
        {"part": "hidden", "kind": "check", "name": "hidden", "problem": "largest difference 0.5 at index (2,)",
         "expected": "", "hint": ""},
    ]
    result = types.SimpleNamespace(student="cy", display="Cy Example", notebook=NOTEBOOK, status="graded",
                                   review=[], points={}, verdicts={})
    for number, exercise in enumerate(found):
        if number == 0:
            result.points[exercise.name] = exercise.points
        else:
            result.points[exercise.name] = 0
            result.verdicts[exercise.name] = verdicts[(number - 1) % len(verdicts)]
    return feedback_page(result, found, sum(e.points for e in found), set())


def check(context, axe: str, shots: Path) -> list[str]:
    """The sample page in the browser ``context``: its problems (reflow, axe), screenshots to ``shots``."""
    from tools.site_test import AXE_ALL, AXE_COLOURS, axe_problems, axe_run

    problems: list[str] = []
    page = context.new_page()
    try:
        page.set_content(sample_page(), wait_until="load")
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme, media="screen")
            for width in (NARROW_PX, WIDE_PX):
                page.set_viewport_size({"width": width, "height": 900})
                widths = page.evaluate(JS_WIDTHS)
                if width == NARROW_PX and widths["scroll"] > NARROW_PX:
                    problems.append(f"{scheme} scheme at {width} px: the page is {widths['scroll']} px wide "
                                    "(scrolls sideways)")
                page.screenshot(path=str(shots / f"feedback-{width}px-{scheme}.png"), full_page=True)
                options = AXE_ALL if scheme == "light" else AXE_COLOURS
                found = {v["id"]: {"help": v["help"], "impact": v["impact"],
                                   "nodes": {n["target"]: n for n in v["nodes"]}}
                         for v in axe_run(page, axe, options)}
                problems += [f"{scheme} scheme at {width} px: {p}" for p in axe_problems(found)]
        page.emulate_media(color_scheme="light", media="print")
        page.set_viewport_size({"width": NARROW_PX, "height": 900})
        widths = page.evaluate(JS_WIDTHS)
        if widths["scroll"] > NARROW_PX:
            problems.append(f"printed at {NARROW_PX} px: the page is {widths['scroll']} px wide")
        text = page.evaluate("() => document.body.innerText")
        for needed in ("Next:", "Exercise 1", "not passed yet", "a known mistake gives"):
            if needed not in text:
                problems.append(f"the page does not say {needed!r}")
        if "ex1" in text.split():
            problems.append("an exercise is named by the grader's id (ex1), not by its task")
    finally:
        page.close()
    return problems


def main() -> int:
    problem = missing_tools()
    if problem:
        print(f"feedback page test cannot run: {problem}", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    from tools.site_test import axe_source

    shots = Path(os.environ.get("MLLM_ARTIFACTS", ROOT / "artifacts")) / "feedback"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="mllm-feedback-") as tmp, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(tmp, executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                                        headless=True)
        try:
            problems = check(context, axe_source(), shots)
        finally:
            context.close()
    for line in problems:
        print(f"FAIL feedback page: {line}")
    print(f"{'FAIL' if problems else 'PASS'} feedback page: reflow at {NARROW_PX} px, axe at {NARROW_PX} and "
          f"{WIDE_PX} px, light and dark; screenshots in {shots}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
