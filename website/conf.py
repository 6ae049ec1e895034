"""Sphinx configuration of the course's website. tools/site.py copies it beside the pages it prepares
(build/site-src) and runs Sphinx there: `make site` (README, "The course as a website")."""

project = "Mastering LLMs, hands on"
html_title = "Mastering LLMs, hands on: from tokens to attention"
copyright = "2026 The Mastering-LLMs course authors (MIT licence)"

extensions = ["myst_nb"]
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
html_copy_source = False  # the notebooks are offered for download on their pages, not as _sources
html_show_sourcelink = False
html_use_index = False  # no index entries: the search and each page's contents do that work
html_theme_options = {"top_of_page_buttons": [], "navigation_with_keys": True}
