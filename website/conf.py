"""Sphinx configuration of the course's website. tools/site.py copies it beside the pages it prepares
(build/site-src) and runs Sphinx there: `make site` (README, "The course as a website")."""

import sys
from pathlib import Path

project = "Mastering LLMs, hands on"
html_title = "Mastering LLMs, hands on: from tokens to attention"
copyright = "2026 The Mastering-LLMs course authors (MIT licence)"

sys.path.insert(0, str(Path(__file__).resolve().parent))  # course_a11y.py, copied beside this file
# course_a11y: each figure's description as its alt, headings with levels, toggles named by their text.
extensions = ["myst_nb", "course_a11y"]
# _ipynb holds the committed notebooks for download; the student versions are downloads, not pages.
exclude_patterns = ["_ipynb", "student/*.ipynb", "jupyter_execute", ".jupyter_cache"]

# The notebooks are shown as committed, never run here.
nb_execution_mode = "off"
# The widget manager that draws saved widgets without a kernel, from the npm registry and shipped in the
# site (_static/vendor, copied by tools/site.py): MyST-NB's default loads it and require.js from CDNs.
nb_ipywidgets_js = {"widgets-mathjax.js": {}, "vendor/html-manager/embed.js": {}}
nb_merge_streams = True

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# MathJax 3 from the npm registry, in the site (Sphinx's default loads MathJax 4 from a CDN).
mathjax_path = "vendor/mathjax/tex-chtml.js"

html_theme = "furo"
html_static_path = ["_static"]
html_css_files = ["course.css"]
# Keyboard and screen-reader access to what is drawn after the page loads (scrolled blocks, widgets).
html_js_files = [("course-a11y.js", {"defer": "defer"})]
html_copy_source = False  # the notebooks are offered for download on their pages, not as _sources
html_show_sourcelink = False
html_use_index = False  # no index entries: the search and each page's contents do that work
html_theme_options = {"top_of_page_buttons": [], "navigation_with_keys": True}
