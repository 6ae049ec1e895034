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
- nothing the test sees shows the test harness's markers or an exercise's hidden tests;
- accessibility: axe-core (website/package-lock.json's devDependencies, injected by the test only, never
  shipped) finds no violation of the WCAG 2.0 and 2.1 A and AA rules on any page: as it loads, with every
  folded cell opened, in the dark colour scheme (the colour rules) and at a phone's width; every image in a
  page's content has a description for its alt, not its file name; and one widget page is used with the
  keyboard alone: Tab from the top of the page (through "Skip to content") reaches a control, which has a
  name and shows its focus, and keys change it without leaving the page;
- the feedback page a graded student reads (tools/feedback_page_test.py): no sideways scrolling at 320 CSS px
  (light, dark, printed), axe-core's rules at 320 and 1,280 px.
Screenshots, the console log and axe's findings (axe.json) go to $MLLM_ARTIFACTS/site/ (default
artifacts/site/). Setup: `make site`, then tools/browser-setup.sh VENV (Debian's chromium, pinned playwright).
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
from tools import browser_test, feedback_page_test  # noqa: E402
from tools.browser_test import CHROMIUM, CHROMIUM_ARGS, free_port, missing_tools, widget_notebooks  # noqa: E402
from tools.site import BEGIN_HIDDEN, OUT, course_a11y, course_rows, js_modules, strip_hidden_tests  # noqa: E402

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
# axe-core's rules that the site must pass: WCAG 2.0 and 2.1, levels A and AA.
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
# In the dark colour scheme only colours change: only the rules about colour run again there.
AXE_COLOUR_RULES = ["color-contrast", "link-in-text-block"]
# axe's options in each state of a page. Contrast is by far the slowest rule (nine tenths of axe's time on a
# notebook's page): it runs with every folded cell opened (the most text, in the same colours as when they
# are folded) and in the dark scheme, not again as the page loads or at a phone's width (the same colours).
AXE_ALL = {"runOnly": {"type": "tag", "values": AXE_TAGS}}
AXE_ALL_BUT_CONTRAST = {**AXE_ALL, "rules": {"color-contrast": {"enabled": False}}}
AXE_COLOURS = {"runOnly": {"type": "rule", "values": AXE_COLOUR_RULES}}
# What a narrower window changes in a page's content: which blocks scroll. The rest of what a phone shows
# (the theme's header, its drawers) is the same on every page: checked in full on the first pages only.
AXE_SCROLLING = {"runOnly": {"type": "rule", "values": ["scrollable-region-focusable"]}}
# The folded cells, as they load (closed): the rest of the page is checked with them opened.
FOLDED = {"include": [["details"]]}
WIDE, NARROW = {"width": 1400, "height": 900}, {"width": 390, "height": 844}  # a laptop's window, a phone's
# In the page: axe-core's violations (its options given), one entry per rule with the elements that fail.
JS_AXE = """async ({context, options}) => {
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));  // resize observers done
  const result = await axe.run(context || document, {...options, resultTypes: ['violations']});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 200),
                              summary: (n.failureSummary || '').slice(0, 300)}))}));
}"""
# In the page: open every folded cell (solutions, setup cells), wait for their fade-in; which were closed.
JS_OPEN_DETAILS = """async () => {
  const closed = [...document.querySelectorAll('details:not([open])')];
  closed.forEach(d => { d.open = true; d.setAttribute('data-site-test-opened', ''); });
  await new Promise(r => setTimeout(r, 50));
  await Promise.all(document.getAnimations().map(a => a.finished.catch(() => null)));
  return closed.length;
}"""
JS_CLOSE_DETAILS = """() => document.querySelectorAll('details[data-site-test-opened]')
  .forEach(d => { d.open = false; d.removeAttribute('data-site-test-opened'); })"""
# In the page: each image of the page's content with its alt (null: none).
JS_IMAGE_ALTS = """() => [...document.querySelectorAll('article img')]
  .map(i => ({src: (i.getAttribute('src') || '').slice(0, 80), alt: i.getAttribute('alt')}))"""
# In the page: the focused element, as a keyboard user's screen reader would meet it.
JS_FOCUSED = """() => { const e = document.activeElement;
  if (!e || e === document.body) return null;
  const style = getComputedStyle(e);
  return {tag: e.tagName.toLowerCase(), role: e.getAttribute('role'), cls: e.className,
          widget: !!e.closest('.jupyter-widgets'),
          control: e.matches('.jupyter-widgets [role=slider], .jupyter-widgets input, .jupyter-widgets select,'
                             + ' .jupyter-widgets textarea'),
          value: e.getAttribute('aria-valuetext') || e.getAttribute('aria-valuenow') || e.value || null,
          outline: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0
                   || (style.boxShadow && style.boxShadow !== 'none'),
          visible: (r => r.bottom > 0 && r.top < innerHeight && r.right > 0 && r.left < innerWidth)
                   (e.getBoundingClientRect())};
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
    """Use the widget's first slider, else its first number box, else its first drop-down, else its text
    box: (what, before, after)."""
    sliders = box.locator("[role=slider]")
    if sliders.count():
        handle = sliders.first
        readout = box.locator(".widget-readout").first
        before = readout.inner_text()
        handle.focus()
        handle.press("Home")
        page.wait_for_timeout(300)
        return "slider moved to its start", before, readout.inner_text()
    numbers = box.locator("input[type=number]")
    if numbers.count():
        number = numbers.first
        before = number.input_value()
        number.focus()
        number.press("ArrowUp")
        page.wait_for_timeout(300)
        return "number box stepped up", before, number.input_value()
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


def axe_source() -> str:
    """axe-core's script, from the npm cache of website/package-lock.json (a devDependency: not in the site)."""
    path = js_modules() / "axe-core" / "axe.min.js"
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: website/package.json's devDependencies name axe-core")
    return path.read_text("utf-8")


def axe_run(page, axe: str, options: dict, context: dict | None = None) -> list[dict]:
    if not page.evaluate("() => !!window.axe"):
        page.add_script_tag(content=axe)
    return page.evaluate(JS_AXE, {"context": context, "options": options})


def check_accessibility(page, axe: str, whole_template: bool = True) -> dict[str, dict]:
    """axe-core's violations in the page, {rule: {help, impact, nodes: {target: node}}}, over four states:
    as loaded (the folded cells, closed); with every folded cell opened (the whole page, every rule); in the
    dark colour scheme (the colour rules); at a phone's width (where more blocks scroll; every other rule
    too if `whole_template`). Each rule runs where it can find something (AXE_ALL_BUT_CONTRAST,
    AXE_SCROLLING, FOLDED). The page is left as it was (folded cells closed, light, wide)."""
    found: dict[str, dict] = {}

    def add(state: str, violations: list[dict]) -> None:
        for v in violations:
            entry = found.setdefault(v["id"], {"help": v["help"], "impact": v["impact"], "nodes": {}})
            for node in v["nodes"]:
                entry["nodes"].setdefault(node["target"], {**node, "state": state})

    folded = page.evaluate("() => !!document.querySelector('details:not([open])')")
    add("as loaded", axe_run(page, axe, AXE_ALL_BUT_CONTRAST, FOLDED) if folded else axe_run(page, axe, AXE_ALL))
    if folded:
        page.evaluate(JS_OPEN_DETAILS)
        add("folded cells opened", axe_run(page, axe, AXE_ALL))
    try:
        page.emulate_media(color_scheme="dark")
        add("dark colour scheme", axe_run(page, axe, AXE_COLOURS))
    finally:
        page.emulate_media(color_scheme="light")
    try:
        page.set_viewport_size(NARROW)
        page.wait_for_timeout(300)  # the page reflows; the scrolled blocks' tab stops follow
        add(f"{NARROW['width']} px wide", axe_run(page, axe, AXE_ALL_BUT_CONTRAST if whole_template
                                                   else AXE_SCROLLING))
    finally:
        page.set_viewport_size(WIDE)
        page.evaluate(JS_CLOSE_DETAILS)
    return found


def axe_problems(found: dict[str, dict]) -> list[str]:
    """One line per rule broken: the rule, how many elements, the first of them, and where it was seen."""
    lines = []
    for rule, entry in sorted(found.items()):
        nodes = list(entry["nodes"].values())
        first = nodes[0]
        lines.append(f"axe {rule} ({entry['impact']}): {len(nodes)} element(s), e.g. {first['target'][:80]} "
                     f"[{first['state']}]: {entry['help']}")
    return lines


def image_problems(images: list[dict]) -> list[str]:
    """Each image of a page's content whose alt is not a description of it (none, a file name, a few words)."""
    problems = []
    for image in images:
        problem = course_a11y.alt_problem(image["alt"])
        if problem:
            problems.append(f"image {image['src']}: {problem}")
    return problems


def keyboard_page(names: list[str]) -> str | None:
    """The widget notebook whose page the keyboard test uses: the first with a slider or a number box (the
    controls the arrow keys step), else the first one."""
    with_widgets = [p for p in widget_notebooks(ROOT / "notebooks") if p.name in names]
    sliders = [p for p in with_widgets if browser_test.STEPPED.search(p.read_text("utf-8"))]
    chosen = (sliders or with_widgets or [None])[0]
    return f"notebooks/{chosen.stem}.html" if chosen else None


def check_keyboard(page, url: str, shots: Path, max_tabs: int = 800) -> str:
    """Use a widget page with the keyboard alone, as one who cannot use a mouse: from the top of the page,
    Tab to the skip link and follow it with Enter, Tab on to the first widget control; it has a name and
    shows its focus; keys change it (the arrows a slider, a choice's first character a drop-down, typing a
    text box), and the page and the focus stay."""
    page.emulate_media(reduced_motion="reduce")  # the theme's smooth scrolling off: the screenshots show the focus
    try:
        return use_widget_with_keyboard(page, url, shots, max_tabs)
    finally:
        page.emulate_media(reduced_motion="no-preference")


def use_widget_with_keyboard(page, url: str, shots: Path, max_tabs: int) -> str:
    page.goto(url, wait_until="load")
    page.wait_for_function("() => document.querySelector('.jupyter-widgets [role=slider], .jupyter-widgets input,"
                           " .jupyter-widgets select')", timeout=30_000)
    page.keyboard.press("Tab")
    first = page.evaluate("() => document.activeElement && document.activeElement.textContent.trim()")
    assert first and "skip" in first.lower(), f"the first Tab stop is {first!r}, not a link that skips to the content"
    page.keyboard.press("Enter")
    tabs, focused = 0, None
    while tabs < max_tabs:
        page.keyboard.press("Tab")
        tabs += 1
        focused = page.evaluate(JS_FOCUSED)
        if focused and focused["control"]:
            break
    assert focused and focused["control"], f"{max_tabs} Tabs after 'Skip to content' reached no widget control"
    control = page.locator("*:focus")
    name = control.aria_snapshot().strip().split("\n")[0].rstrip(":")
    assert focused["outline"], f"the focused control ({name}) shows no focus outline"
    assert focused["visible"], f"the focused control ({name}) is outside the window: the page did not scroll to it"
    assert re.search(r'"[^"]+"', name), f"the focused control has no accessible name: {name}"
    page.screenshot(path=str(shots / "keyboard-1-focused.png"))
    before, kind = focused["value"], focused["role"] or focused["tag"]
    if name.split('"')[0].strip(" -") == "spinbutton":  # a number box: the arrow keys step it
        keys = ["ArrowUp", "ArrowUp", "ArrowDown"]
        for key in keys:
            page.keyboard.press(key)
        after = page.evaluate(JS_FOCUSED)["value"]
    elif kind == "slider":
        keys = ["ArrowRight", "ArrowRight", "ArrowLeft", "Home"]
        for key in keys:
            page.keyboard.press(key)
        after = page.evaluate(JS_FOCUSED)["value"]
        if after == before:  # at its start already: End moves it
            page.keyboard.press("End")
            keys.append("End")
            after = page.evaluate(JS_FOCUSED)["value"]
    elif kind == "select":  # the first character of the next choice selects it, on every platform
        keys = [page.evaluate("() => { const s = document.activeElement;"
                              " return s.options[(s.selectedIndex + 1) % s.options.length].text.trim()[0]; }")]
        page.keyboard.press(keys[0])
        after = page.evaluate(JS_FOCUSED)["value"]
    else:
        keys = ["Control+A", "typed 'war'"]
        page.keyboard.press("Control+A")
        page.keyboard.type("war")
        after = page.evaluate(JS_FOCUSED)["value"]
    page.wait_for_timeout(300)
    page.screenshot(path=str(shots / "keyboard-2-changed.png"))
    assert page.url.split("#")[0] == url, f"the keys {keys} left the page for {page.url}"
    still = page.evaluate(JS_FOCUSED)
    assert still and still["control"], f"the keys {keys} took the focus away from {name}"
    assert after != before, f"{name}: the keys {keys} left its value at {before!r}"
    return (f"{tabs} Tabs after 'Skip to content' reach {name!r} (focus outline shown); "
            f"{', '.join(keys)}: {before!r} -> {after!r}, on the same page")


def report_axe(found: dict[str, dict], shots: Path) -> None:
    """axe-core's findings over the whole site, by rule (elements and pages), and in full in axe.json."""
    (shots / "axe.json").write_text(json.dumps(found, indent=1))
    by_rule: dict[str, list[int]] = {}
    for rules in found.values():
        for rule, entry in rules.items():
            count = by_rule.setdefault(rule, [0, 0])
            count[0] += len(entry["nodes"])
            count[1] += 1
    failing = sum(1 for rules in found.values() if rules)
    print(f"axe-core ({', '.join(AXE_TAGS)}): {sum(c[0] for c in by_rule.values())} violation(s) on {failing} "
          f"of {len(found)} pages" + "".join(f"\n  {rule}: {n} element(s) on {pages} page(s)"
                                            for rule, (n, pages) in sorted(by_rule.items(), key=lambda x: -x[1][0])))


def run(site: Path, shots: Path) -> int:
    from playwright.sync_api import sync_playwright

    readme = (ROOT / "README.md").read_text("utf-8")
    names = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    order = [f"notebooks/{Path(n).stem}.html" for n in names]  # the course's order (README's table)
    widget_pages = {f"notebooks/{p.stem}.html": p.name for p in widget_notebooks(ROOT / "notebooks")}
    axe = axe_source()
    axe_found: dict[str, dict] = {}
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
                    tmp, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, viewport=WIDE)
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
                        # Accessibility: every image described, no violation of axe-core's WCAG A and AA rules.
                        images = page.evaluate(JS_IMAGE_ALTS)
                        undescribed = image_problems(images)
                        problems += undescribed
                        # The theme's parts shown at a phone's width: in full on the home page and the
                        # first notebook's; elsewhere, which blocks scroll.
                        axe_found[rel] = check_accessibility(page, axe, rel in ("index.html", order[0]))
                        problems += axe_problems(axe_found[rel])
                        broken_rules = {r: len(e["nodes"]) for r, e in axe_found[rel].items()}
                        summary += (", each image described" if images and not undescribed else "") + (
                            f"; axe: {sum(broken_rules.values())} violation(s) {broken_rules}" if broken_rules
                            else "; axe: no violation")
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
                        problems = [] if expected and not missing else [f"expected {expected}, missing {missing}"]
                        if term == SEARCH_TERMS[0]:  # the search page, with its results: axe as on every page
                            axe_found[f"search.html?q={term}"] = check_accessibility(page, axe, False)
                            problems += axe_problems(axe_found[f"search.html?q={term}"])
                        print(f"{'FAIL' if problems else 'PASS'} search {term!r}: {len(hrefs)} results, notebooks "
                              f"{found}" + (f"; {problems}" if problems else ""))
                        if problems:
                            failures.append(f"search {term!r}: {problems}")
                    # The keyboard alone, on a widget page.
                    keyboard = keyboard_page(names)
                    if keyboard:
                        try:
                            result, ok = check_keyboard(page, base + keyboard, shots), True
                        except AssertionError as exc:
                            result, ok = str(exc), False
                        print(f"{'PASS' if ok else 'FAIL'} keyboard on {keyboard}: {result}", flush=True)
                        if not ok:
                            failures.append(f"keyboard on {keyboard}: {result}")
                    # The feedback page a graded student reads: reflow at 320 px, axe, light and dark.
                    feedback = feedback_page_test.check(browser, axe, shots)
                    print(f"{'FAIL' if feedback else 'PASS'} feedback page (tools/feedback_page_test.py)"
                          + (f": {feedback}" if feedback else ": reflows at 320 px, axe: no violation"), flush=True)
                    if feedback:
                        failures.append(f"feedback page: {feedback}")
                    if outside:
                        failures.append(f"requests to other hosts: {outside}")
                finally:
                    browser.close()
        finally:
            stop(server)
    report_axe(axe_found, shots)
    checks = len(seen) + 2 + len(SEARCH_TERMS) + (1 if keyboard_page(names) else 0)
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
