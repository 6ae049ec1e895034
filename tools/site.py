"""The course as a static website, built from the committed notebooks: no execution, no network.

    python tools/site.py build [--out build/site] [--solutions folded|removed]

(`make site` runs it in .venv-site, made from requirements-site-lock.txt.) Sphinx and MyST-NB render each
notebook with its saved outputs, plots and widget state; Furo is the theme. The steps:

1. The JavaScript the site ships (website/package.json, locked by website/package-lock.json): the widget
   manager that draws saved ipywidgets without a kernel, and MathJax. `npm ci` installs it once into a
   cache outside the clone (MLLM_JS_CACHE, default ~/.cache/mllm-course/js), keyed by the lock; the files
   the pages load are copied into the site, which then loads nothing from any other host.
2. The pages' sources are prepared in build/site-src (only files whose text changed are rewritten, so a
   second build redoes only what changed): the home page (the course table, from README.md), a copy of
   each lesson for the site, TEACHING.md and the student versions' table, with links to files that are
   not on the site pointed at the repository.
3. Sphinx builds the HTML with warnings as errors (-W --keep-going, -n): a broken cross-reference, a
   missing image or an unknown lexer fails the build. The site's extension (website/course_a11y.py) gives
   each figure the description stored with its output (metadata["image/png"]["alt"]) as its alt, the
   navigation's captions a heading level, and the folded cells' toggles their visible words as their name;
   website/_static/course-a11y.js does in the browser what only the browser knows (README, "Accessibility").
4. Every figure of every notebook must have a description: one without (or with a file name, or a few
   words) fails the build, after the site is written, with the notebook, cell and output named.

A lesson's copy for the site: the test tooling's markers (`# NBVAL_...` lines, comments addressed to test
runners) are removed; in exercises, hidden tests and the solution markers are removed, and so are the
outputs of a check cell that had hidden tests (they print their results too). Solutions are shown folded
behind "Show a solution" (--solutions folded, the default), or replaced by the stub a student gets
(--solutions removed). The Colab badge (a remote image) becomes links: Colab and the .ipynb download, for
the lesson and its student version (only the student version when the solutions are removed). Under each
widget, a note says its output needs Python.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.notebooks import BADGE_TAG, SETUP_TAG, WIDGET_VIEW, repository_url  # noqa: E402

WEBSITE = ROOT / "website"  # conf.py, its extension, the CSS and JS, the npm lock of the JavaScript the site ships
sys.path.insert(0, str(WEBSITE))
import course_a11y  # noqa: E402  (the site's Sphinx extension: figures' descriptions, headings, toggles)

EXTENSIONS = ["course_a11y.py"]  # copied beside conf.py, which loads them
BUILD = ROOT / "build"
SRC = BUILD / "site-src"  # the pages' sources, prepared from the repository
DOCTREES = BUILD / "site-doctrees"  # Sphinx's cache: what makes a second build fast
OUT = BUILD / "site"
JS_CACHE = Path(os.environ.get("MLLM_JS_CACHE", Path.home() / ".cache" / "mllm-course" / "js"))
DOWNLOADS = "_ipynb"  # the committed notebooks, byte for byte, offered for download (not pages)

# What the site copies from the npm packages, under _static/vendor/: (package folder, what to copy).
# MathJax: the one component the pages load, its fonts, and what it loads on demand (TeX extensions, the
# context menu, its accessibility tools); not the other 17 MB of combined components.
VENDOR = {
    "html-manager": ("@jupyter-widgets/html-manager/dist", ["embed.js", "*.woff2", "*.woff", "*.ttf", "*.eot",
                                                            "*.svg", "embed.js.LICENSE.txt"]),
    "mathjax": ("mathjax/es5", ["tex-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions", "ui", "a11y",
                                "sre"]),
}
VENDOR_LICENSES = {"mathjax": "mathjax/LICENSE"}  # html-manager's notices are in its embed.js.LICENSE.txt

# --- What the test harness needs and a reader does not -------------------------------------------------

NBVAL_MARKER = re.compile(r"^[ \t]*#[ \t]*NBVAL_[A-Z_]+[ \t]*$")
# Words that say a comment is addressed to the test tooling rather than to the reader.
TOOLING = re.compile(r"\bnbval\b|\bpytest\b|\brunners?\b|\bthe tests\b|\bnot compared\b|\bCI\b", re.IGNORECASE)
PARENTHETICAL = re.compile(r"\s*\([^()]*\)")
NOQA = re.compile(r"[ \t]+#[ \t]*noqa\b[^\n]*$")
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
# What `nbgrader generate_assignment` (mllm-classroom release) puts where a solution was.
CODE_STUB = ["# YOUR CODE HERE", "raise NotImplementedError()"]
MARKDOWN_STUB = ["YOUR ANSWER HERE"]
SOLUTION_MODES = ("folded", "removed")


class SiteError(Exception):
    """Something the build cannot go on without: said in one line, exit status 2."""


def _comment_text(line: str) -> str:
    return line.strip()[1:].strip()


def strip_tooling_comments(source: str) -> str:
    """A code cell's source without the test harness's comments; every other line is kept as it is.

    Removed: `# NBVAL_...` marker lines; parenthetical remarks in comments that speak to the tooling
    ("(... under other runners, so this cell's output is not compared ...)", "(the tests point ...)"),
    with the comment lines they leave empty; trailing `# noqa` remarks. Code lines are never removed.
    """
    lines = source.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if NBVAL_MARKER.match(line):
            i += 1
            continue
        if not line.lstrip().startswith("#"):
            out.append(NOQA.sub("", line))
            i += 1
            continue
        # A block of full-line comments at one indentation: parentheticals may span its lines.
        indent = line[: len(line) - len(line.lstrip())]
        j = i
        while j < len(lines) and lines[j].startswith(indent + "#") and not NBVAL_MARKER.match(lines[j]):
            j += 1
        block = lines[i:j]
        text = " ".join(_comment_text(b) for b in block)
        kept = PARENTHETICAL.sub(lambda m: "" if TOOLING.search(m.group(0)) else m.group(0), text).strip()
        if kept == text:
            out.extend(block)
        elif kept.strip(" .,;:"):
            width = max(len(b) for b in block)
            out.extend(textwrap.wrap(kept, width=width, initial_indent=indent + "# ",
                                     subsequent_indent=indent + "# "))
        i = j
    return "\n".join(out)


def strip_hidden_tests(source: str) -> tuple[str, bool]:
    """The source without its hidden tests (the marker lines and everything between), and whether it had any."""
    out, hidden, found = [], False, False
    for line in source.split("\n"):
        if line.strip() == BEGIN_HIDDEN:
            hidden, found = True, True
        elif line.strip() == END_HIDDEN:
            if not hidden:
                raise SiteError(f"'{END_HIDDEN}' without '{BEGIN_HIDDEN}' before it")
            hidden = False
        elif not hidden:
            out.append(line)
    if hidden:
        raise SiteError(f"'{BEGIN_HIDDEN}' without '{END_HIDDEN}' after it")
    return "\n".join(out).rstrip("\n"), found


def strip_solution_markers(source: str, keep_solution: bool, markdown: bool = False) -> str:
    """The source without its solution markers: the solution kept, or replaced by a student's stub.

    A solution cell without markers is all solution (as nbgrader reads it).
    """
    stub = MARKDOWN_STUB if markdown else CODE_STUB
    lines = source.split("\n")
    if not any(line.strip() == BEGIN_SOLUTION for line in lines):
        return source if keep_solution else "\n".join(stub)
    out, inside = [], False
    for line in lines:
        if line.strip() == BEGIN_SOLUTION:
            if inside:
                raise SiteError(f"'{BEGIN_SOLUTION}' inside a solution")
            inside = True
            if not keep_solution:
                indent = line[: len(line) - len(line.lstrip())]
                out.extend(indent + s for s in stub)
        elif line.strip() == END_SOLUTION:
            if not inside:
                raise SiteError(f"'{END_SOLUTION}' without '{BEGIN_SOLUTION}' before it")
            inside = False
        elif keep_solution or not inside:
            out.append(line)
    if inside:
        raise SiteError(f"'{BEGIN_SOLUTION}' without '{END_SOLUTION}' after it")
    return "\n".join(out)


# --- A lesson's copy for the site ----------------------------------------------------------------------

def colab_url(repo: str, folder: str, name: str) -> str:
    github = repo.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{github}/blob/main/{folder}/{name}"


def links_line(repo: str, name: str, depth: str, student: bool, solutions: str = "folded") -> str:
    """The links at the top of a notebook's page: Colab and download, both of the learner's version (the lesson
    with its outputs and its exercises to do; this page shows the solutions folded)."""
    if not student:
        line = (f"[Open in Colab]({colab_url(repo, 'notebooks', name)}) · "
                f"{{download}}`Download the notebook <{depth}{DOWNLOADS}/notebooks/{name}>`")
    else:
        line = (f"[Open in Colab]({colab_url(repo, 'student', name)}) · "
                f"{{download}}`Download the notebook <{depth}{DOWNLOADS}/student/{name}>`")
    return f":::{{container}} course-links\n{line}\n:::"


WIDGET_NOTE = (
    ":::{note}\n"
    "The widget above is drawn from the notebook's saved state, so its controls move on this page. What it "
    "shows below them was computed by Python when the notebook ran, and changes only where the notebook runs: "
    "open it in Colab (top of the page) or in JupyterLab.\n"
    ":::"
)


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def learner_sources(learner: dict | None) -> dict[str, str]:
    """Each graded cell's source in a learner's version (student/NAME.ipynb), by its nbgrader grade_id."""
    found = {}
    for cell in (learner or {}).get("cells", []):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id:
            found[grade_id] = "".join(cell.get("source", ""))
    return found


def site_notebook(nb: dict, name: str, repo: str, solutions: str = "folded", student: bool = True,
                  learner: dict | None = None) -> dict:
    """The copy of a lesson notebook (nbformat 4 as a dict) that the site renders; `nb` is not changed.

    With the solutions removed, each solution cell shows what the learner's version (`learner`, the
    committed student/NAME.ipynb) has in its place; without one, the stub nbgrader would write."""
    if solutions not in SOLUTION_MODES:
        raise SiteError(f"--solutions: got {solutions!r}, expected one of {', '.join(SOLUTION_MODES)}")
    stubs = learner_sources(learner)
    nb = copy.deepcopy(nb)
    # IPython's lexer: plain Python, and the `%magic` and `!command` lines a notebook may have.
    nb.setdefault("metadata", {}).setdefault("language_info", {})["pygments_lexer"] = "ipython3"
    cells = []
    for cell in nb.get("cells", []):
        source = "".join(cell.get("source", ""))
        meta = cell.setdefault("metadata", {})
        grader = meta.get("nbgrader", {})
        if BADGE_TAG in _tags(cell):
            source = links_line(repo, name, "../", student, solutions)
        elif cell.get("cell_type") == "code":
            source, hidden = strip_hidden_tests(source)
            if hidden:
                cell["outputs"] = []  # they print the hidden tests' results too
            if grader.get("solution"):
                source = (stubs[grader["grade_id"]] if solutions == "removed" and grader.get("grade_id") in stubs
                          else strip_solution_markers(source, keep_solution=solutions == "folded"))
                if solutions == "folded":
                    meta["tags"] = [*_tags(cell), "hide-input"]
                    meta["mystnb"] = {"code_prompt_show": "Show a solution", "code_prompt_hide": "Hide the solution"}
                else:
                    cell["outputs"] = []
            source = strip_tooling_comments(source)
            if SETUP_TAG in _tags(cell):
                meta["tags"] = [*_tags(cell), "hide-input"]
                meta["mystnb"] = {"code_prompt_show": "Show the Colab setup cell",
                                  "code_prompt_hide": "Hide the Colab setup cell"}
        elif grader.get("solution"):  # a written answer
            source = (stubs[grader["grade_id"]] if solutions == "removed" and grader.get("grade_id") in stubs
                      else strip_solution_markers(source, keep_solution=solutions == "folded", markdown=True))
        cell["source"] = source
        cells.append(cell)
        if cell.get("cell_type") == "code" and any(WIDGET_VIEW in out.get("data", {})
                                                   for out in cell.get("outputs", [])):
            cells.append({"cell_type": "markdown", "id": f"{cell.get('id', len(cells))}-widget-note", "metadata": {},
                          "source": WIDGET_NOTE})
    nb["cells"] = cells
    return nb


# --- The other pages -----------------------------------------------------------------------------------

MD_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")


def point_links(text: str, page: str, on_site, repo: str) -> str:
    """Relative links of a page at `page` (a path in the repository): kept where `on_site(path)` says the
    target is on the site, otherwise pointed at the file in the repository."""
    base = Path(page).parent

    def fix(m: re.Match) -> str:
        label, target = m.groups()
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return m.group(0)
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(base / path).replace(os.sep, "/")
        if on_site(resolved):
            return m.group(0)
        return f"[{label}]({repo}/blob/main/{resolved}{'#' + anchor if anchor else ''})"

    return MD_LINK.sub(fix, text)


def readme_sections(readme: str) -> dict[str, str]:
    """README.md's text by `## ` heading; the text before the first one is under ''."""
    sections, name = {"": []}, ""
    for line in readme.split("\n"):
        if line.startswith("## "):
            name = line[3:].strip()
            sections[name] = []
        else:
            sections[name].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in sections.items()}


def table_rows(text: str) -> list[list[str]]:
    """The cells of a Markdown table's rows (header first, the --- line left out)."""
    rows = []
    for line in text.split("\n"):
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        rows.append(cells)
    return rows


def course_rows(readme: str, names: list[str]) -> list[dict]:
    """The README's course table, one dict per notebook: number, name, post, topics, time."""
    section = readme_sections(readme).get("The course")
    if section is None:
        raise SiteError("README.md has no '## The course' section: the home page's table comes from it")
    rows = table_rows(section)
    if len(rows) < 2 or len(rows[0]) != 6:
        raise SiteError(f"README.md, 'The course': expected a table of 6 columns, got {rows[:1]}")
    found = []
    for cells in rows[1:]:
        if len(cells) != 6:
            raise SiteError(f"README.md, 'The course': a row of {len(cells)} cells, expected 6: {cells[:2]}")
        # The lesson, or the learner's version of it (the README links what a learner opens).
        link = re.search(r"\]\((?:notebooks|student)/([^)]+\.ipynb)\)", cells[1])
        if not link:
            raise SiteError(f"README.md, 'The course': row {cells[0]} does not link notebooks/NAME.ipynb "
                            "or student/NAME.ipynb")
        found.append({"number": cells[0], "name": link.group(1), "post": cells[2], "topics": cells[3],
                      "time": cells[4]})
    listed = [r["name"] for r in found]
    if listed != names:
        raise SiteError(f"README.md's course table lists {listed}; notebooks/ holds {names}")
    return found


def notebook_title(nb: dict) -> str:
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            match = re.search(r"^#\s+(.+)$", "".join(cell.get("source", "")), re.M)
            if match:
                return match.group(1).strip()
    raise SiteError("a notebook has no '# Title' heading in a Markdown cell")


def index_page(readme: str, rows: list[dict], titles: dict[str, str], repo: str, folder: str = "student") -> str:
    """The home page: the README's introduction, the course table with links, and the site's contents."""
    sections = readme_sections(readme)
    title_line, _, intro = sections[""].partition("\n")
    table = ["| # | Notebook | Follows the post | Topics | Quick size, 2-core CPU | Links |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        name = r["name"]
        links = (f"[Colab]({colab_url(repo, folder, name)}) · "
                 f"{{download}}`.ipynb <{DOWNLOADS}/{folder}/{name}>`")
        table.append(f"| {r['number']} | [{titles[name]}](notebooks/{name}) | {r['post']} | {r['topics']} | "
                     f"{r['time']} | {links} |")
    toctree = "\n".join(f"notebooks/{r['name'].removesuffix('.ipynb')}" for r in rows)
    return f"""{title_line}

{intro.strip()}

## The course

Each page shows a notebook as CI ran it: its code, outputs, plots and widgets. *Colab* opens it ready
to run; *.ipynb* downloads it for JupyterLab. Times are for a fresh kernel at the quick size on a
2-core CPU.

{chr(10).join(table)}

## Run it, teach it

To run the course on your machine, see the [README]({repo}#start-on-your-machine). Teachers: the
[teacher's guide](TEACHING.md) (handing out the exercises, grading with nbgrader) and the
[student versions](student/README.md) of every notebook.

```{{toctree}}
:hidden:
:caption: Notebooks

{toctree}
```

```{{toctree}}
:hidden:
:caption: Teaching

TEACHING
student/README
```
"""


def student_page(text: str, repo: str) -> str:
    """student/README.md for the site: each notebook's row with its download and Colab links."""
    def row(m: re.Match) -> str:
        label, name = m.groups()
        return (f"{{download}}`{label} <../{DOWNLOADS}/student/{name}>` "
                f"([Colab]({colab_url(repo, 'student', name)}))")

    text = re.sub(r"\[([^\]]+)\]\(([\w.-]+\.ipynb)\)", row, text)
    return point_links(text, "student/README.md", lambda p: False, repo)


# --- The JavaScript the site ships ---------------------------------------------------------------------

def js_modules(cache: Path = JS_CACHE) -> Path:
    """node_modules of website/package-lock.json, installed once by `npm ci` in the cache (keyed by the lock)."""
    lock = WEBSITE / "package-lock.json"
    key = hashlib.sha256((WEBSITE / "package.json").read_bytes() + lock.read_bytes()).hexdigest()[:12]
    home = cache / key
    modules = home / "node_modules"
    if (home / ".installed").exists():
        return modules
    npm = shutil.which("npm")
    if npm is None:
        raise SiteError("npm is missing: the site's JavaScript comes from the npm registry (Node.js 18 or newer; "
                        "Debian: apt-get install nodejs npm)")
    if cache.is_dir():  # other locks' installs
        for old in cache.iterdir():
            if old.name != key:
                shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(WEBSITE / name, home / name)
    print(f"npm ci (website/package-lock.json) into {home}", flush=True)
    start = time.perf_counter()
    result = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                            cwd=home, capture_output=True, text=True)
    if result.returncode != 0:
        raise SiteError(f"npm ci failed in {home}:\n{result.stdout}{result.stderr}")
    (home / ".installed").write_text(f"{time.perf_counter() - start:.1f} s\n")
    return modules


def copy_vendor(modules: Path, static: Path) -> None:
    """The files the pages load, from node_modules into _static/vendor (rewritten only when they differ)."""
    for name, (folder, patterns) in VENDOR.items():
        src, dst = modules / folder, static / "vendor" / name
        wanted: dict[Path, Path] = {}
        for pattern in patterns:
            matches = [src / pattern] if (src / pattern).is_dir() else sorted(src.glob(pattern))
            if not matches or not all(m.exists() for m in matches):
                raise SiteError(f"{src / pattern} is missing: is website/package-lock.json installed? "
                                f"(delete {modules.parent} to install it again)")
            for match in matches:
                files = [match] if match.is_file() else sorted(p for p in match.rglob("*") if p.is_file())
                wanted.update({f.relative_to(src): f for f in files})
        if name in VENDOR_LICENSES:
            wanted[Path("LICENSE")] = modules / VENDOR_LICENSES[name]
        for rel, file in wanted.items():
            write_if_changed(dst / rel, file.read_bytes())
        for old in [p for p in dst.rglob("*") if p.is_file() and p.relative_to(dst) not in wanted]:
            old.unlink()


# --- The build -----------------------------------------------------------------------------------------

def write_if_changed(path: Path, data: bytes | str) -> bool:
    """Write only when the content differs, so that Sphinx rebuilds only the pages whose source changed."""
    data = data.encode("utf-8") if isinstance(data, str) else data
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def prepare(src: Path, solutions: str, modules: Path | None) -> list[str]:
    """Write the pages' sources into `src`; return the notebooks' names in course order."""
    import nbformat

    repo = repository_url()
    names = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    readme = (ROOT / "README.md").read_text("utf-8")
    rows = course_rows(readme, names)
    student_names = {p.name for p in (ROOT / "student").glob("*.ipynb")}
    wanted: set[Path] = set()

    def put(rel: str, data: bytes | str) -> None:
        wanted.add(src / rel)
        write_if_changed(src / rel, data)

    titles = {}
    for name in names:
        raw = (ROOT / "notebooks" / name).read_bytes()
        nb = json.loads(raw)
        titles[name] = notebook_title(nb)
        learner = json.loads((ROOT / "student" / name).read_text("utf-8")) if name in student_names else None
        page = site_notebook(nb, name, repo, solutions, student=name in student_names, learner=learner)
        nbformat.validate(nbformat.from_dict(page))
        put(f"notebooks/{name}", json.dumps(page, indent=1, ensure_ascii=False) + "\n")
        put(f"{DOWNLOADS}/notebooks/{name}", raw)
    for name in sorted(student_names):
        put(f"{DOWNLOADS}/student/{name}", (ROOT / "student" / name).read_bytes())
    on_site = {"TEACHING.md", "student/README.md", *(f"notebooks/{n}" for n in names)}  # README.md is not
    # Every learner's link opens the learner's version (the lesson, with the exercises to do).
    folder = "student" if student_names >= set(names) else "notebooks"
    put("index.md", index_page(readme, rows, titles, repo, folder))
    teaching = (ROOT / "TEACHING.md").read_text("utf-8")
    put("TEACHING.md", point_links(teaching, "TEACHING.md", on_site.__contains__, repo))
    put("student/README.md", student_page((ROOT / "student" / "README.md").read_text("utf-8"), repo))
    put("conf.py", (WEBSITE / "conf.py").read_bytes())
    for extension in EXTENSIONS:
        wanted.add(src / extension)
        if write_if_changed(src / extension, (WEBSITE / extension).read_bytes()):
            shutil.rmtree(DOCTREES, ignore_errors=True)  # Sphinx keeps the pages it read with the old code
    for css in sorted((WEBSITE / "_static").glob("*")):
        put(f"_static/{css.name}", css.read_bytes())
    if modules is not None:
        copy_vendor(modules, src / "_static")
    wanted.update(p for p in (src / "_static" / "vendor").rglob("*") if p.is_file())
    for old in [p for p in src.rglob("*") if p.is_file() and p not in wanted]:
        old.unlink()  # a page whose notebook was removed or renamed
    return names


def undescribed_figures(folder: Path = ROOT / "notebooks") -> list[str]:
    """Each figure of the notebooks in `folder` that has no description (or a file name, or a few words as
    one), as 'NOTEBOOK, cell N (id ...), output K: ...'. Its description is its output's
    metadata["image/png"]["alt"], which mllm_utils.figures.show writes and the site uses as the image's alt."""
    problems = []
    for path in sorted(folder.glob("*.ipynb")):
        problems += course_a11y.figure_alts(json.loads(path.read_text("utf-8")), path.name)[1]
    return problems


def build(out: Path = OUT, solutions: str = "folded") -> int:
    try:
        from sphinx.cmd.build import build_main
    except ImportError:
        raise SiteError("Sphinx is not installed here: `make site` builds .venv-site from "
                        "requirements-site-lock.txt, or pip install -r requirements-site-lock.txt") from None
    start = time.perf_counter()
    modules = js_modules()
    names = prepare(SRC, solutions, modules)
    prepared = time.perf_counter() - start
    # -W --keep-going: every warning is reported, then the build fails; -n: every reference must resolve.
    status = build_main(["-b", "html", "-W", "--keep-going", "-n", "-q", "-d", str(DOCTREES), str(SRC), str(out)])
    if status:
        print(f"site build failed (status {status}): see the warnings above", file=sys.stderr)
        return 1
    # Checked on every build (Sphinx warns only when it reads a page again); the site is written first, so
    # that what else is wrong with it can still be seen.
    undescribed = undescribed_figures()
    if undescribed:
        print(f"site build failed: {len(undescribed)} figure(s) with no description; a reader who cannot see "
              "them hears their file name:\n  " + "\n  ".join(undescribed), file=sys.stderr)
        return 1
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    pages = len(list(out.rglob("*.html")))
    print(f"site: {out} ({len(names)} notebooks, {pages} HTML pages, {size / 1e6:.1f} MB) built in "
          f"{time.perf_counter() - start:.1f} s (JavaScript and sources {prepared:.1f} s)")
    shown = os.path.relpath(out) if out.is_relative_to(Path.cwd()) else out
    print(f"preview: python -m http.server -d {shown} 8000   (then open http://127.0.0.1:8000)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the site (no execution, no network once the JavaScript is cached)")
    b.add_argument("--out", type=Path, default=OUT, help="the folder to write (default build/site)")
    b.add_argument("--solutions", choices=SOLUTION_MODES, default="folded",
                   help="folded: solutions shown behind 'Show a solution' (default); removed: a student's stub")
    args = parser.parse_args(argv)
    try:
        return build(args.out.resolve(), args.solutions)
    except SiteError as exc:
        print(f"site: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
