"""Real-browser test of the course's widgets: JupyterLab driven by Debian's Chromium through Playwright.

    python tools/browser_test.py [--untrusted] [--timeout SECONDS] [NOTEBOOK_NAME ...]

For each notebook whose saved outputs hold a widget: open it in JupyterLab, check the widgets are drawn
as controls from the notebook's saved widget state, run all cells, check every widget is a live control
and no cell shows an error, check every control has an accessible name (what a screen reader says: the
name in Chromium's accessibility tree), use the first control once (type, slide or choose) and check the
widget's output changes. One notebook (the first with a slider; --keyboard NAME for another) is also used
with the keyboard alone, after the run: from its notebook in command mode, the arrow keys select the
widget's cell, Tab reaches its first control, which shows its focus, and keys change it (arrows, or typing
and Enter); the widget's output then changes. Screenshots, the page's console log and JupyterLab's log go
to $MLLM_ARTIFACTS/browser/ (default artifacts/browser/). Setup: tools/browser-setup.sh VENV (Debian's
chromium, pinned playwright).

JupyterLab draws saved widgets only in a trusted notebook (the widget renderer is not "safe"), so the
copies are trusted first, as `jupyter trust` does for a learner; --untrusted shows a fresh clone's view.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.notebooks import RUN_ENV  # noqa: E402  (the tests' quick-size environment)

CHROMIUM = "/usr/bin/chromium"
LAB_VENV = ROOT / ".venv"  # the learner's environment (`make lab`): its JupyterLab is the one tested
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
# Headless, and quiet: on a closed network Chromium's own background connections are refused.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Console errors that come from the course: widgets, their comms and models, kernel tracebacks.
COURSE_ERROR = re.compile(r"widget|\bcomm\b|model|Traceback|kernel", re.IGNORECASE)
# Noise that is not the course's: the offline Colab badge, a layout notice of Chromium's.
BENIGN = re.compile(r"net::ERR_(NAME_NOT_RESOLVED|INTERNET_DISCONNECTED|CONNECTION_REFUSED)|ResizeObserver loop")
# Lab settings: no news pop-up (it covers the page and asks the internet), every cell in the DOM.
LAB_SETTINGS = {"@jupyterlab/apputils-extension/notification": {"fetchNews": "false"},
                "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"}}

# In the page: how each widget output of the open notebook is drawn (cell index, state, text).
JS_WIDGET_OUTPUTS = """mime => window.jupyterapp.shell.currentWidget.content.widgets.flatMap((cell, i) =>
  cell.model.type !== 'code' ? [] : cell.model.outputs.toJSON().flatMap((out, k) => {
    if (!(out.data && out.data[mime])) return [];
    const node = cell.outputArea.node.querySelectorAll(':scope > .jp-OutputArea-child')[k];
    const text = node ? node.innerText : '';
    const control = node && node.querySelector('.jupyter-widgets input, .jupyter-widgets select,'
      + ' .jupyter-widgets textarea, .jupyter-widgets [role=slider]');
    const state = !node ? 'missing' : /Loading widget/.test(text) ? 'loading'
      : /Error displaying widget/.test(text) ? 'error' : control ? 'control' : 'text';
    const live = !!node && !node.querySelector('.jupyter-widgets-disconnected');
    return [{cell: i, state, live, text: text.slice(0, 120)}];
  }))"""
# In the page: the run's progress (code cells not yet run, error outputs, the kernel's status).
JS_RUN_STATE = """() => { const nb = window.jupyterapp.shell.currentWidget;
  const code = nb.content.widgets.filter(c => c.model.type === 'code' && c.model.sharedModel.getSource().trim());
  const errors = code.flatMap((c, i) => c.model.outputs.toJSON().filter(o => o.output_type === 'error')
    .map(o => `cell ${nb.content.widgets.indexOf(c)}: ${o.ename}: ${o.evalue}`));
  const kernel = nb.sessionContext.session && nb.sessionContext.session.kernel;
  return {pending: code.filter(c => c.model.executionCount === null).length, errors,
          status: kernel ? kernel.status : 'none'}; }"""
# In the page: the text and pictures a widget shows as its output (Output and HTML widgets inside it).
JS_OUTPUT_SIGNATURE = """node => [...node.querySelectorAll('.widget-output, .widget-html-content')]
  .map(e => e.innerText + [...e.querySelectorAll('img')].map(i => i.src.slice(-40)).join('')).join('\\n')"""
# The roles of a control in Chromium's accessibility tree: each needs a name (WCAG 4.1.2).
CONTROL_ROLES = {"button", "checkbox", "combobox", "listbox", "radio", "searchbox", "slider", "spinbutton",
                 "switch", "textbox"}
# What may be a control, in a widget's output; its role and name come from Chromium (Locator.aria_snapshot).
CONTROL_CANDIDATES = (".jp-OutputArea-output .jupyter-widgets :is(input:not([type=hidden]), select, textarea, "
                      "button, [role], [contenteditable=true], [tabindex])")
# In the page: where a control sits: its cell's index, the visible label of its widget, its kind.
JS_CONTROL_PLACE = """e => { const nb = window.jupyterapp.shell.currentWidget.content;
  const cell = nb.widgets.findIndex(c => c.node.contains(e));
  const widget = e.closest('.widget-inline-hbox, .widget-inline-vbox, .jupyter-widgets');
  const label = widget && widget.querySelector('.widget-label');
  return {cell, label: label ? label.textContent.trim() : '', html: e.outerHTML.slice(0, 80)}; }"""
# In the page: the focused element, its value, its look (to tell whether its focus shows), and its place.
JS_FOCUS_STATE = """() => { const e = document.activeElement; const nb = window.jupyterapp.shell.currentWidget.content;
  const s = getComputedStyle(e);
  return {tag: e.tagName.toLowerCase(), role: e.getAttribute('role'), active: nb.activeCellIndex, mode: nb.mode,
          control: e.matches('.jp-OutputArea .jupyter-widgets :is(input, select, textarea, [role=slider])'),
          cell: nb.widgets.findIndex(c => c.node.contains(e)),
          value: e.getAttribute('aria-valuetext') || e.getAttribute('aria-valuenow') || e.value || null,
          look: [s.outlineStyle, s.outlineWidth, s.outlineColor, s.boxShadow, s.backgroundColor, s.borderColor]
                .join(' ')}; }"""


def aria_role_name(snapshot: str) -> tuple[str, str]:
    """(role, name) from the first line of Playwright's aria snapshot, e.g. '- slider "temperature"'."""
    first = snapshot.strip().split("\n")[0] if snapshot.strip() else ""
    match = re.match(r'-\s+([\w-]+)(?:\s+"((?:[^"\\]|\\.)*)")?', first)
    return (match.group(1), (match.group(2) or "").strip()) if match else ("", "")


def check_control_names(page) -> tuple[int, list[str]]:
    """Every control in the open notebook's widget outputs has an accessible name: (controls, problems)."""
    candidates = page.locator(CONTROL_CANDIDATES)
    controls, problems = 0, []
    for i in range(candidates.count()):
        element = candidates.nth(i)
        role, name = aria_role_name(element.aria_snapshot())
        if role not in CONTROL_ROLES:
            continue
        controls += 1
        if not name:
            place = element.evaluate(JS_CONTROL_PLACE)
            seen = f", its visible label {place['label']!r} is not tied to it" if place["label"] else ", no label"
            problems.append(f"cell {place['cell'] + 1}: a {role} with no accessible name{seen} ({place['html']})")
    return controls, problems


def use_with_keyboard(page, node, target: int, shots: Path, name: str) -> str:
    """The widget of cell `target` (counted from 0), used with the keyboard alone; the notebook has the
    focus, in command mode.

    The arrow keys select the cell, Tab reaches its first control (through the cell's toolbar), which must
    show its focus; the arrow keys (a slider, a drop-down) or typing and Enter (a text box) change it, and
    the widget's output changes. Returns what was done, or raises AssertionError saying what went wrong."""
    page.evaluate("() => window.jupyterapp.shell.currentWidget.content.node.focus()")
    page.keyboard.press("Escape")
    moves = 0
    while (state := page.evaluate(JS_FOCUS_STATE))["active"] != target and moves < 500:
        page.keyboard.press("ArrowUp" if state["active"] > target else "ArrowDown")
        moves += 1
    assert state["active"] == target, f"the arrow keys did not reach cell {target + 1} (at cell {state['active'] + 1})"
    tabs = 0
    while not (state := page.evaluate(JS_FOCUS_STATE))["control"] and tabs < 20:
        page.keyboard.press("Tab")
        tabs += 1
    assert state["control"] and state["cell"] == target, (
        f"{tabs} Tabs from cell {target + 1} reached no control of its widget (focus on a {state['tag']} of cell "
        f"{state['cell'] + 1})")
    role, label = aria_role_name(page.locator(":focus").aria_snapshot())
    focused = page.locator(":focus").element_handle()
    shoot(page, shots, name, "4-keyboard-focused")
    old, before = node.evaluate(JS_OUTPUT_SIGNATURE), state["value"]
    if state["role"] == "slider":
        keys = ["ArrowRight", "ArrowRight", "ArrowLeft"]
    elif role == "spinbutton":  # a number box: the arrow keys step it
        keys = ["ArrowUp", "ArrowUp", "ArrowDown"]
    elif state["tag"] == "select":
        # The first character of the next choice selects it. Not the arrow keys: in command mode JupyterLab
        # takes them to move between cells, even from a drop-down (it is not an editable field).
        keys = [page.evaluate("() => { const s = document.activeElement;"
                              " return s.options[(s.selectedIndex + 1) % s.options.length].text.trim()[0]; }")]
    else:
        keys = ["Control+A", "peace", "Enter"]  # a word of both vocabularies; interact() types another
    for key in keys:
        page.keyboard.type(key) if key == "peace" else page.keyboard.press(key)
    after_state = page.evaluate(JS_FOCUS_STATE)
    assert after_state["control"] and after_state["cell"] == target, (
        f"the keys {keys} took the focus away from the {role}, to a {after_state['tag']} of cell "
        f"{after_state['cell'] + 1}")
    assert after_state["value"] != before, f"the keys {keys} left the {role} at {before!r}"
    new = poll(page, JS_OUTPUT_SIGNATURE, node.element_handle(), lambda text: text != old, 120,
               f"the widget's output did not change after the keys {keys}")
    # Its focus shows: it looks different focused from what it looks like once the focus moves on.
    look = after_state["look"]
    page.keyboard.press("Tab")
    unfocused = focused.evaluate("""e => { const s = getComputedStyle(e);
      return [s.outlineStyle, s.outlineWidth, s.outlineColor, s.boxShadow, s.backgroundColor, s.borderColor]
             .join(' '); }""")
    time.sleep(2)  # the kernel may still be drawing
    shoot(page, shots, name, "5-keyboard-used")
    assert unfocused != look, f"the focused {role} looks the same as when it is not focused: its focus does not show"
    named = f'{role} "{label}"' if label else f"{role} (no name)"
    return (f"keyboard: {moves} arrow keys to cell {target + 1}, {tabs} Tabs to its {named}; {', '.join(keys)}: "
            f"{before!r} -> {after_state['value']!r}, output {first_line(old)!r} -> {first_line(new)!r}")


def widget_cells(notebook: dict) -> list[int]:
    """Indices of the code cells whose saved outputs display a widget."""
    return [i for i, cell in enumerate(notebook.get("cells", []))
            if any(WIDGET_MIME in out.get("data", {}) for out in cell.get("outputs", []))]


def widget_notebooks(folder: Path) -> list[Path]:
    """The notebooks of `folder` that display a widget, found from their JSON (none hard-coded)."""
    return [p for p in sorted(folder.glob("*.ipynb")) if widget_cells(json.loads(p.read_text("utf-8")))]


def course_errors(messages: list[tuple[str, str]]) -> list[str]:
    """The (kind, text) messages that fail the test: page exceptions, and console errors from the course."""
    return [text for kind, text in messages if not BENIGN.search(text)
            and (kind == "pageerror" or (kind == "error" and COURSE_ERROR.search(text)))]


def missing_tools() -> str | None:
    """Why the browser test cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: run tools/browser-setup.sh with this Python's venv"
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing: run tools/browser-setup.sh (as root: apt-get install -y chromium)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(work: Path, port: int, token: str, log, jupyter: str) -> subprocess.Popen:
    """JupyterLab on the copies, with its own settings, data and config (nothing of the user's, no internet)."""
    for name, values in LAB_SETTINGS.items():
        path = work / "settings" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = {**os.environ, **RUN_ENV, "JUPYTER_CONFIG_DIR": str(work / "config"),
           "JUPYTER_DATA_DIR": str(work / "data"), "JUPYTERLAB_SETTINGS_DIR": str(work / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces"), "IPYTHONDIR": str(work / "ipython")}
    cmd = [jupyter, "lab", "--no-browser", "--ip", "127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={token}", "--allow-root", f"--ServerApp.root_dir={work / 'notebooks'}",
           "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly", "--LabApp.expose_app_in_browser=True"]
    return subprocess.Popen(cmd, env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for_lab(proc: subprocess.Popen, url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {proc.returncode}; see jupyterlab.log")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(1)
    raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s; see jupyterlab.log")


def stop(proc: subprocess.Popen) -> None:
    """Stop JupyterLab and its kernels (its own process group, started by us)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


def poll(page, js, arg, done, timeout: float, what: str):
    """Evaluate `js` each second until done(result); fail with `what` and the last result after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = page.evaluate(js, arg)
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout:.0f} s (last seen: {result})")
        time.sleep(1)


def shoot(page, shots: Path, name: str, step: str) -> None:
    """Screenshot with the first widget in view (JupyterLab scrolls inside its panel, not the page)."""
    page.evaluate("""mime => { const nb = window.jupyterapp.shell.currentWidget.content;
      const cell = nb.widgets.find(c => c.model.type === 'code'
        && JSON.stringify(c.model.outputs.toJSON()).includes(mime));
      if (cell) cell.node.scrollIntoView({block: 'end'}); }""", WIDGET_MIME)
    time.sleep(0.5)
    page.screenshot(path=str(shots / f"{Path(name).stem}-{step}.png"))


def interact(page, node) -> str:
    """Use the widget's first control, preferring a text box, then a number box, then a slider, then a
    drop-down."""
    if node.locator("input[type=text], textarea").count():
        box = node.locator("input[type=text], textarea").first
        box.fill("war")  # a word of both of the course's vocabularies (War and Peace, WikiText)
        box.press("Enter")
        return "typed 'war'"
    if node.locator("input[type=number]").count():
        box = node.locator("input[type=number]").first
        box.focus()
        box.press("ArrowUp")
        return f"number box stepped up (to {box.input_value()})"
    if node.locator("[role=slider]").count():
        handle = node.locator("[role=slider]").first
        handle.focus()
        handle.press("End")
        return f"slider to its end ({handle.get_attribute('aria-valuetext')})"
    select = node.locator("select").first
    other = select.evaluate("s => (s.selectedIndex + 1) % s.options.length")
    select.select_option(index=other)
    return f"chose '{select.evaluate('s => s.options[s.selectedIndex].text')}'"


def check_notebook(page, url: str, name: str, shots: Path, timeout: float, keyboard: bool = False) -> str:
    """Open, run and use one notebook (with the keyboard alone too, if `keyboard`); return its summary, or
    raise AssertionError saying what is wrong."""
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    before = poll(page, JS_WIDGET_OUTPUTS, WIDGET_MIME, lambda ws: ws and all(w["state"] != "loading" for w in ws),
                  60, "the widgets did not finish loading")
    shoot(page, shots, name, "1-opened")
    # Not fatal: running the cells is still worth checking when the saved state is missing.
    not_drawn = [f"cell {w['cell']} shows {w['text'][:50]!r}" for w in before if w["state"] != "control"]
    opened = f"on open NOT drawn as controls: {not_drawn}" if not_drawn else f"{len(before)} widget(s) drawn on open"

    # Run All sent before the kernel is up is lost (an untrusted notebook is shown before it is).
    poll(page, JS_RUN_STATE, None, lambda r: r["status"] == "idle", 120, "the kernel did not start")
    start = time.monotonic()
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    time.sleep(2)  # let the run begin before reading its progress
    run = poll(page, JS_RUN_STATE, None, lambda r: r["status"] == "idle" and (r["errors"] or not r["pending"]),
               timeout, "the cells did not all run")
    seconds = time.monotonic() - start
    shoot(page, shots, name, "2-ran")
    assert not run["errors"], f"error output: {run['errors']}"
    after = page.evaluate(JS_WIDGET_OUTPUTS, WIDGET_MIME)
    not_live = [w for w in after if w["state"] != "control" or not w["live"]]
    assert not not_live, f"after running, widgets are not live controls: {not_live}"

    controls, unnamed = check_control_names(page)
    node = page.locator(".jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output > .jupyter-widgets").first
    keys = ""
    if keyboard:
        target = node.evaluate("e => window.jupyterapp.shell.currentWidget.content.widgets"
                               ".findIndex(c => c.node.contains(e))")
        keys = "; " + use_with_keyboard(page, node, target, shots, name)
    old = node.evaluate(JS_OUTPUT_SIGNATURE)
    action = interact(page, node)
    new = poll(page, JS_OUTPUT_SIGNATURE, node.element_handle(), lambda text: text != old, 120,
               f"the widget's output did not change after: {action}")
    time.sleep(2)  # the kernel may still be drawing
    shoot(page, shots, name, "3-used")
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
    names = f"{controls} control(s)" + (f", {len(unnamed)} with no name: {unnamed}" if unnamed else ", each named")
    summary = (f"{opened}; ran all cells in {seconds:.0f} s; {names}; {action}: {first_line(old)!r} -> "
               f"{first_line(new)!r}{keys}")
    assert not not_drawn and not unnamed, summary
    return summary


def first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "")[:60]


# The widget models a learner steps with the arrow keys: sliders and number boxes.
STEPPED = re.compile(r'"_model_name": "(\w*Slider|(Bounded)?(Float|Int)Text)Model"')


def keyboard_notebook(paths: list[Path]) -> str | None:
    """The notebook used with the keyboard alone: the first with a slider or a number box (the arrow keys
    change those, the hardest to use without a mouse), else the first one."""
    sliders = [p for p in paths if STEPPED.search(p.read_text("utf-8"))]
    chosen = sliders or paths
    return chosen[0].name if chosen else None


def run_all(names: list[str], shots: Path, trust: bool, timeout: float, venv: Path,
            keyboard: str | None = None) -> int:
    """Test each notebook on copies (JupyterLab autosaves; the committed files are never written)."""
    from playwright.sync_api import sync_playwright

    failed = 0
    with tempfile.TemporaryDirectory(prefix="mllm-browser-") as tmp, \
            open(shots / "jupyterlab.log", "w") as lab_log, open(shots / "console.log", "w") as console:
        work, jupyter = Path(tmp), str(venv / "bin" / "jupyter")
        shutil.copytree(ROOT / "notebooks", work / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        if trust:
            subprocess.run([jupyter, "trust", *names], cwd=work / "notebooks", check=True,
                           env={**os.environ, "JUPYTER_DATA_DIR": str(work / "data")}, capture_output=True)
        port, token = free_port(), os.urandom(16).hex()
        lab = start_lab(work, port, token, lab_log, jupyter)
        try:
            base = f"http://127.0.0.1:{port}"  # reset, in each notebook's address: no tabs of the last one
            wait_for_lab(lab, f"{base}/api/status?token={token}")
            with sync_playwright() as pw:
                browser = pw.chromium.launch_persistent_context(
                    str(work / "chromium"), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
                    viewport={"width": 1280, "height": 900})
                try:
                    page = browser.new_page()
                    messages: list[tuple[str, str]] = []
                    page.on("console", lambda m: messages.append((m.type, m.text)))
                    page.on("pageerror", lambda e: messages.append(("pageerror", str(e))))
                    page.on("dialog", lambda d: d.accept())  # "leave with unsaved changes?": the copy may go
                    for name in names:
                        messages.clear()
                        try:
                            url = f"{base}/lab/tree/{name}?reset&token={token}"
                            result, ok = check_notebook(page, url, name, shots, timeout, name == keyboard), True
                        except Exception as exc:  # one notebook's failure must not hide the others'
                            result, ok = str(exc).splitlines()[0][:1000], False
                            page.screenshot(path=str(shots / f"{Path(name).stem}-failed.png"), timeout=30_000)
                        errors = course_errors(messages)
                        if errors:
                            result, ok = f"{result}; errors in the page: {[e.splitlines()[0] for e in errors]}", False
                        failed += not ok
                        print(f"{'PASS' if ok else 'FAIL'} {name}: {result}", flush=True)
                        console.writelines(f"{name} {kind}: {text}\n" for kind, text in messages)
                finally:
                    browser.close()
        finally:
            stop(lab)
    print(f"{len(names) - failed} passed, {failed} failed")
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="notebook names (default: every one with a widget)")
    parser.add_argument("--untrusted", action="store_true", help="open the copies untrusted, as a fresh clone")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed to run one notebook")
    parser.add_argument("--lab-venv", type=Path, default=LAB_VENV, help="environment whose JupyterLab runs (.venv)")
    parser.add_argument("--keyboard", metavar="NAME", help="the notebook also used with the keyboard alone "
                        "(default: the first of those tested with a slider, else the first)")
    args = parser.parse_args()
    # Absolute: the test runs JupyterLab from a temporary folder, where a relative `.venv` means nothing.
    args.lab_venv = args.lab_venv.absolute()
    problem = missing_tools()
    if problem:
        print(f"browser test cannot run: {problem}", file=sys.stderr)
        return 2
    if not (args.lab_venv / "bin" / "jupyter").is_file():
        print(f"browser test cannot run: --lab-venv: {args.lab_venv} has no bin/jupyter (`make setup` makes .venv)",
              file=sys.stderr)
        return 2
    names = args.notebooks or [p.name for p in widget_notebooks(ROOT / "notebooks")]
    keyboard = args.keyboard or keyboard_notebook([ROOT / "notebooks" / n for n in names])
    shots = Path(os.environ.get("MLLM_ARTIFACTS", ROOT / "artifacts")) / "browser"
    shutil.rmtree(shots, ignore_errors=True)  # only this run's pictures
    shots.mkdir(parents=True)
    return 1 if run_all(names, shots, not args.untrusted, args.timeout, args.lab_venv, keyboard) else 0


if __name__ == "__main__":
    sys.exit(main())
