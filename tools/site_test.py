"""Browser test of the course's website (tools/site.py): the built site in Debian's Chromium, through Playwright.

    python tools/site_test.py [--site build/site]

The site is served by `python -m http.server` on 127.0.0.1, and every request to another host is stopped
and fails the test: the site must work offline. Checked:
- every page, found by following the links from the home page, loads with no console error, no page
  exception and no failed request; its images are drawn; its math is typeset (MathJax, no error);
- every internal link resolves: the page or file answers, and a #fragment names an element of its page;
- each notebook that displays a widget shows it as a control drawn from the saved state (not the text that
  stands in for a widget), and the control answers one use: a slider moved or another choice taken in a
  drop-down changes the value it displays (no kernel: what Python computed stays as it was);
- a search for a term finds every notebook whose topics (README's course table) name it;
- nothing the test sees shows the test harness's markers or an exercise's hidden tests.
Screenshots and the console log go to $MLLM_ARTIFACTS/site/ (default artifacts/site/). Setup: `make site`,
then tools/browser-setup.sh VENV (Debian's chromium, pinned playwright).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.browser_test import CHROMIUM, CHROMIUM_ARGS, free_port, missing_tools, widget_notebooks  # noqa: E402
from tools.site import BEGIN_HIDDEN, OUT, course_rows, strip_hidden_tests  # noqa: E402

HOST = "127.0.0.1"
# Text that must never reach a reader of the site.
HARNESS = re.compile(r"NBVAL_|BEGIN HIDDEN TESTS|END HIDDEN TESTS|BEGIN SOLUTION|END SOLUTION")
# Terms a learner might search for; the notebooks expected are those whose topics name the term.
SEARCH_TERMS = ["attention", "LSTM", "temperature", "embedding"]

# In the page: whatever is not right with its images and math.
JS_PAGE_PROBLEMS = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  const images = [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
    .map(i => 'image not drawn: ' + i.getAttribute('src').slice(0, 80));
  const rawMath = [...document.querySelectorAll('.math')].filter(m => !m.querySelector('mjx-container'))
    .map(m => 'math not typeset: ' + m.textContent.slice(0, 60));
  const mathErrors = [...document.querySelectorAll('mjx-merror')]
    .map(m => 'math error: ' + (m.getAttribute('data-mjx-error') || m.textContent).slice(0, 80));
  return {problems: [...images, ...rawMath, ...mathErrors], math: document.querySelectorAll('mjx-container').length,
          images: document.images.length,
          next: (document.querySelector('a.next-page') || {}).href,
          prev: (document.querySelector('a.prev-page') || {}).href,
          toc: document.querySelectorAll('.toc-drawer .toc-tree a').length,
          links: [...document.querySelectorAll('a[href]')].map(a => a.href),
          ids: [...document.querySelectorAll('[id]')].map(e => e.id),
          text: document.body.innerText};
}"""
# In the page: each saved widget view and what is drawn in its place.
JS_WIDGETS = """() => [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')]
  .map(s => { const box = s.parentElement;
    const text = box.innerText;
    const control = box.querySelector('.jupyter-widgets input, .jupyter-widgets select, .jupyter-widgets textarea,'
      + ' .jupyter-widgets [role=slider]');
    return {state: /Error displaying widget/.test(text) ? 'error' : control ? 'control'
      : box.querySelector('.jupyter-widgets') ? 'drawn, no control' : 'not drawn', text: text.slice(0, 100)}; })"""


def serve(site: Path, port: int, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "http.server", "--bind", HOST, "--directory", str(site), str(port)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(proc: subprocess.Popen, url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the web server exited with {proc.returncode}; see http.log")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"the web server did not answer within {timeout:.0f} s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def expected_hits(readme: str, names: list[str], term: str) -> list[str]:
    """The notebooks whose topics or post (README's course table) name `term`."""
    word = re.compile(rf"\b{re.escape(term)}", re.IGNORECASE)
    return [r["name"] for r in course_rows(readme, names) if word.search(r["topics"] + " " + r["post"])]


def hidden_lines(notebook: Path) -> list[str]:
    """Lines of a notebook's hidden tests that appear nowhere else in it (what the site must not show)."""
    nb = json.loads(notebook.read_text("utf-8"))
    sources = ["".join(c.get("source", "")) for c in nb["cells"]]
    visible = "\n".join(strip_hidden_tests(s)[0] for s in sources)
    lines = set()
    for source in sources:
        if BEGIN_HIDDEN in source:
            hidden = source.split(BEGIN_HIDDEN, 1)[1]
            lines.update(line.strip() for line in hidden.split("\n")
                         if len(line.strip()) >= 30 and not line.strip().startswith("#")
                         and line.strip() not in visible)
    return sorted(lines)


def notebook_page_problems(page, base: str, rel: str, found: dict, order: list[str]) -> list[str]:
    """What a notebook's page lacks: its place in the course (previous, next), its contents, its links."""
    problems, i, name = [], order.index(rel), Path(rel).stem + ".ipynb"
    for label, key, want in (("previous", "prev", order[i - 1] if i else None),
                             ("next", "next", order[i + 1] if i + 1 < len(order) else None)):
        if want and found[key] != base + want:
            problems.append(f"its {label} page is {found[key]}, expected {want}")
    if found["toc"] < 3:
        problems.append(f"its table of contents has {found['toc']} entries")
    # The lesson, or its student version where the site was built with --solutions removed.
    colab = [u for u in found["links"] if u.startswith("https://colab.research.google.com/github/")
             and u.endswith((f"/notebooks/{name}", f"/student/{name}"))]
    downloads = [u for u in found["links"] if u.startswith(base + "_downloads/") and u.endswith(f"/{name}")]
    committed = [(ROOT / folder / name).read_bytes() for folder in ("notebooks", "student")
                 if (ROOT / folder / name).exists()]
    if not colab:
        problems.append("no 'Open in Colab' link to the notebook")
    if not downloads:
        problems.append("no download of the notebook")
    elif page.request.get(downloads[0]).body() not in committed:
        problems.append(f"the download {downloads[0].removeprefix(base)} is not the committed notebook")
    return problems


def use_widget(page, box) -> tuple[str, str, str]:
    """Use the widget's first slider, else its first drop-down, else its text box: (what, before, after)."""
    sliders = box.locator("[role=slider]")
    if sliders.count():
        handle = sliders.first
        readout = box.locator(".widget-readout").first
        before = readout.inner_text()
        handle.focus()
        handle.press("Home")
        page.wait_for_timeout(300)
        return "slider moved to its start", before, readout.inner_text()
    selects = box.locator("select")
    if selects.count():
        select = selects.first
        before = select.evaluate("s => s.options[s.selectedIndex].text")
        select.select_option(index=select.evaluate("s => (s.selectedIndex + 1) % s.options.length"))
        page.wait_for_timeout(300)
        return "another choice in the drop-down", before, select.evaluate("s => s.options[s.selectedIndex].text")
    text = box.locator("input[type=text], textarea").first
    before = text.input_value()
    text.fill("war")
    return "typed 'war'", before, text.input_value()


def check_widgets(page, name: str, shots: Path) -> str:
    deadline = time.monotonic() + 30
    while True:
        views = page.evaluate(JS_WIDGETS)
        if views and all(v["state"] == "control" for v in views) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    wrong = [v for v in views if v["state"] != "control"]
    assert views, "no saved widget view in the page"
    assert not wrong, f"widgets not drawn as controls: {wrong}"
    box = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').first.locator("xpath=..")
    box.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / f"{Path(name).stem}-widget-1-drawn.png"))
    what, before, after = use_widget(page, box)
    page.screenshot(path=str(shots / f"{Path(name).stem}-widget-2-used.png"))
    assert after != before, f"{what}: the displayed value stayed {before!r}"
    return f"{len(views)} widget(s) drawn as controls; {what}: {before!r} -> {after!r}"


def run(site: Path, shots: Path) -> int:
    from playwright.sync_api import sync_playwright

    readme = (ROOT / "README.md").read_text("utf-8")
    names = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    order = [f"notebooks/{Path(n).stem}.html" for n in names]  # the course's order (README's table)
    widget_pages = {f"notebooks/{p.stem}.html": p.name for p in widget_notebooks(ROOT / "notebooks")}
    secrets = {f"notebooks/{Path(n).stem}.html": hidden_lines(ROOT / "notebooks" / n) for n in names}
    failures: list[str] = []
    port = free_port()
    base = f"http://{HOST}:{port}/"
    with tempfile.TemporaryDirectory(prefix="mllm-site-") as tmp, open(shots / "http.log", "w") as http_log, \
            open(shots / "console.log", "w") as console:
        server = serve(site, port, http_log)
        try:
            wait_for(server, base)
            with sync_playwright() as pw:
                browser = pw.chromium.launch_persistent_context(
                    tmp, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
                    viewport={"width": 1400, "height": 900})
                try:
                    events: list[str] = []
                    outside: list[str] = []

                    def route(r):
                        if urlparse(r.request.url).hostname == HOST:
                            r.continue_()
                        else:
                            outside.append(r.request.url)
                            r.abort()

                    browser.route("**/*", route)
                    page = browser.new_page()
                    page.on("console", lambda m: events.append(f"console {m.type}: {m.text}"))
                    page.on("pageerror", lambda e: events.append(f"page exception: {e}"))
                    page.on("requestfailed", lambda r: events.append(f"request failed: {r.url} {r.failure}"))
                    page.on("response", lambda r: r.status >= 400 and events.append(f"HTTP {r.status}: {r.url}"))

                    # Every page reachable from the home page.
                    queue, seen, links, ids = [base + "index.html"], set(), {}, {}
                    while queue:
                        url = queue.pop(0)
                        if url in seen:
                            continue
                        seen.add(url)
                        rel = url.removeprefix(base)
                        events.clear()
                        outside.clear()
                        response = page.goto(url, wait_until="load")
                        found = page.evaluate(JS_PAGE_PROBLEMS)
                        page.wait_for_timeout(200)
                        problems = list(found["problems"])
                        if response is None or response.status != 200:
                            problems.append(f"HTTP {response.status if response else 'no response'}")
                        summary = f"{found['images']} images, {found['math']} formulas"
                        if rel in order:
                            problems += notebook_page_problems(page, base, rel, found, order)
                            summary += f", {found['toc']} sections in its contents"
                        if rel in widget_pages:
                            try:
                                summary += "; " + check_widgets(page, widget_pages[rel], shots)
                            except AssertionError as exc:
                                problems.append(str(exc))
                        page.evaluate("() => window.scrollTo(0, 0)")
                        page.screenshot(path=str(shots / (rel.replace("/", "-").removesuffix(".html") + ".png")))
                        text = page.evaluate("() => document.body.innerText")  # after the widgets were drawn
                        if rel.startswith("notebooks/"):  # the teacher's guide names the markers, rightly
                            problems += [f"shows the harness's {m!r}" for m in sorted(set(HARNESS.findall(text)))]
                        problems += [f"shows a hidden test: {line[:60]!r}" for line in secrets.get(rel, [])
                                     if line in text]
                        problems += [e for e in events if e.startswith(("console error", "page exception",
                                                                        "request failed", "HTTP"))]
                        problems += [f"asked another host: {u[:100]}" for u in outside]
                        console.writelines(f"{rel} {e}\n" for e in events)
                        ids[rel] = set(found["ids"])
                        for link in found["links"]:
                            target, fragment = urldefrag(link)
                            if not target.startswith(base):
                                continue
                            links.setdefault(target, set()).add((rel, unquote(fragment)))
                            if target.endswith(".html") and target not in seen:
                                queue.append(target)
                        if problems:
                            failures.append(f"{rel}: {problems}")
                        print(f"{'FAIL' if problems else 'PASS'} {rel}: {summary}"
                              + (f"; {problems}" if problems else ""), flush=True)

                    # Every internal link: its page or file answers, its #fragment is an element there.
                    broken = []
                    for target, sources in sorted(links.items()):
                        rel = target.removeprefix(base)
                        if target not in seen:
                            status = page.request.get(target).status
                            if status != 200:
                                broken.append(f"{rel} (HTTP {status}, linked from {sorted(s for s, _ in sources)[0]})")
                            continue
                        broken += [f"{rel}#{frag} (no such id, linked from {src})" for src, frag in sorted(sources)
                                   if frag and frag not in ids[rel]]
                    files = [t for t in links if t not in seen]
                    print(f"{'FAIL' if broken else 'PASS'} links: {len(links)} internal targets "
                          f"({len(seen)} pages, {len(files)} files), "
                          f"{sum(len(s) for s in links.values())} links" + (f"; broken: {broken}" if broken else ""))
                    if broken:
                        failures.append(f"broken links: {broken}")

                    # Search: each term finds the notebooks that teach it.
                    for term in SEARCH_TERMS:
                        expected = expected_hits(readme, names, term)
                        page.goto(f"{base}search.html?q={term}")
                        page.wait_for_function("() => /found \\d+ page|did not match/i.test("
                                               "(document.querySelector('.search-summary') || {}).innerText || '')",
                                               timeout=30_000)
                        hrefs = page.eval_on_selector_all("ul.search li a", "as => as.map(a => a.href)")
                        found = sorted({Path(urlparse(h).path).stem + ".ipynb" for h in hrefs
                                        if "/notebooks/" in h})
                        missing = [n for n in expected if n not in found]
                        page.screenshot(path=str(shots / f"search-{term}.png"))
                        ok = expected and not missing
                        print(f"{'PASS' if ok else 'FAIL'} search {term!r}: {len(hrefs)} results, notebooks {found}"
                              + (f"; expected {expected}, missing {missing}" if not ok else ""))
                        if not ok:
                            failures.append(f"search {term!r}: expected {expected}, missing {missing}")
                    if outside:
                        failures.append(f"requests to other hosts: {outside}")
                finally:
                    browser.close()
        finally:
            stop(server)
    checks = len(seen) + 1 + len(SEARCH_TERMS)
    print(f"{checks - len(failures)} passed, {len(failures)} failed")
    return len(failures)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, default=OUT, help="the built site (default build/site: `make site`)")
    args = parser.parse_args()
    problem = missing_tools()
    if problem:
        print(f"site test cannot run: {problem}", file=sys.stderr)
        return 2
    if not (args.site / "index.html").is_file():
        print(f"site test cannot run: {args.site} has no index.html (build it: `make site`)", file=sys.stderr)
        return 2
    shots = Path(os.environ.get("MLLM_ARTIFACTS", ROOT / "artifacts")) / "site"
    shutil.rmtree(shots, ignore_errors=True)  # only this run's pictures
    shots.mkdir(parents=True)
    print(f"screenshots and console log: {shots}")
    return 1 if run(args.site.resolve(), shots) else 0


if __name__ == "__main__":
    sys.exit(main())
