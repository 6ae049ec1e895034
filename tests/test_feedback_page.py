"""The feedback page a graded student reads: each exercise by its task, what to do next, messages that wrap.

Its look in a browser (reflow at 320 CSS px, axe-core, light and dark, screenshots) is checked by
tools/feedback_page_test.py, which `make test-site` runs (tools/site_test.py) in Chromium.
"""

import re
import types

from mllm_classroom.reports import FEEDBACK_CSS, exercise_heading, feedback_page
from tools.feedback_page_test import sample_page


def test_each_exercise_is_named_by_its_task_never_by_the_graders_id():
    assert exercise_heading(types.SimpleNamespace(name="ex2", points=1)) == "Exercise 2"
    titled = types.SimpleNamespace(name="ex2", points=1, title="a vocabulary of the top-k tokens")
    assert exercise_heading(titled) == "Exercise 2: a vocabulary of the top-k tokens"
    page = sample_page()
    assert re.findall(r"<h2>(Exercise \d)", page)[:3] == ["Exercise 1", "Exercise 2", "Exercise 3"]
    assert ">ex1<" not in page and "<td>ex" not in page


def test_the_page_says_what_to_do_next():
    page = sample_page()
    assert "<strong>Next:</strong> open 03_recurrent_networks.ipynb and, for exercises 2, 3, 4 and 5," in page
    result = types.SimpleNamespace(student="ada", display="", notebook="03_recurrent_networks", status="graded",
                                   review=[], points={"ex1": 1.0}, verdicts={})
    done = feedback_page(result, [types.SimpleNamespace(name="ex1", points=1.0)], 1.0, set())
    assert "every exercise passed: nothing left to do in this notebook" in done
    missing = feedback_page(types.SimpleNamespace(**{**vars(result), "status": "missing"}), [], 1.0, set())
    assert "Not graded: nothing was handed in." in missing and "<strong>Next:</strong>" in missing


def test_messages_wrap_and_the_page_follows_the_reader_s_scheme():
    page = sample_page()
    assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in page
    assert "<pre class='message'>" in page and "<pre>" not in page
    assert re.search(r"pre\.message \{[^}]*white-space: pre-wrap; overflow-wrap: anywhere;", FEEDBACK_CSS)
    assert "@media (prefers-color-scheme: dark)" in FEEDBACK_CSS and "@media print" in FEEDBACK_CSS
    assert "this is what a known mistake gives" in page  # the checks' own diagnosis reaches the page
