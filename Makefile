# The course's commands. `make lab` and `make test` work on a fresh machine with
# Python 3.10+ (3.11 is what CI uses): each creates its environment from the lock first.
# .venv is a learner's (JupyterLab and the course); .venv-teach adds a teacher's nbgrader,
# and is where the tests run, since they grade submissions end to end.
VENV   ?= .venv
TEACH_VENV ?= .venv-teach
SITE_VENV ?= .venv-site
PYTHON ?= python3
PY     := $(VENV)/bin/python
TPY    := $(TEACH_VENV)/bin/python
SPY    := $(SITE_VENV)/bin/python
SUBMISSIONS ?= submissions
GRADES ?= grades
# The environment of the committed outputs (quick size, no progress bars, fixed CPU code paths) is RUN_ENV in
# tools/notebooks.py; conftest.py applies it to every pytest run, so no target repeats it here.

.PHONY: setup teach-setup sandbox-setup lab test test-all test-units test-envs test-browser test-loaded test-perturbed test-smoke test-full lint notebooks headers \
	benchmarks lock clean release grade site site-setup test-site

setup: $(VENV)/.installed

$(VENV)/.installed: requirements-lock.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-lock.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@# matplotlib builds its font cache on first import and says so on stderr: do it
	@# now, not inside the first notebook that plots.
	MPLBACKEND=Agg $(PY) -c "import matplotlib.pyplot"
	touch $@

teach-setup: $(TEACH_VENV)/.installed

$(TEACH_VENV)/.installed: requirements-lock.txt requirements-teach-lock.txt pyproject.toml
	$(PYTHON) -m venv $(TEACH_VENV)
	$(TPY) -m pip install --quiet --disable-pip-version-check -r requirements-lock.txt -r requirements-teach-lock.txt
	$(TPY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	MPLBACKEND=Agg $(TPY) -c "import matplotlib.pyplot"
	touch $@

# Jupyter refuses to run as root (containers, some cloud machines) unless told to.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

# JupyterLab draws the widgets saved in a notebook (before any cell runs) only in a trusted notebook,
# and a fresh clone's notebooks are not trusted yet: `jupyter trust` records them as the learner's own.
# A learner opens the learner's versions (student/): the lessons with their outputs, the exercises to do.
# JupyterLab's root is the course's folder, so that solutions/ (linked after each exercise) opens offline
# in the same lab; it starts in student/.
lab: setup  ## open the course in JupyterLab, in student/ (solutions/ beside it)
	$(VENV)/bin/jupyter trust student/*.ipynb >/dev/null
	$(VENV)/bin/jupyter lab $(LAB_ARGS) \
	--ServerApp.root_dir=. --LabApp.default_url=/lab/tree/student

test: test-units  ## unit tests, the classroom kit end to end, lint, then every notebook under nbval (quick size)
	$(TPY) -m pytest notebooks student

# What CI runs (.ci/run): everything `make test` checks, then the course in the other environments it
# promises, in a real browser, and on a busy machine. The notebooks run under nbval once, on the busy
# machine (test-loaded), not a second time unloaded. Downloaded environments are cached outside the
# clone (MLLM_ENV_CACHE, default ~/.cache/mllm-course/envs); screenshots go to MLLM_ARTIFACTS.
test-all: test-units test-envs test-browser test-site test-smoke test-loaded  ## the full test command: everything `make test` does, and more

test-units: teach-setup sandbox-setup  ## `make test` without the notebooks: unit tests, the classroom kit, lint
	$(TPY) -m pytest tests
	$(TEACH_VENV)/bin/ruff check .

test-envs: teach-setup  ## Colab-shaped (Python 3.13, torch 2.11) and oldest (3.10, torch 2.5): nbval, unit tests
	$(TPY) tools/environments.py test colab oldest

test-browser: setup teach-setup  ## JupyterLab in headless Chromium: widgets drawn, run, and answering a click
	bash tools/browser-setup.sh $(TEACH_VENV)
	$(TPY) tools/browser_test.py --lab-venv $(VENV)

# The website (tools/site.py): Sphinx and MyST-NB in their own environment, .venv-site; the JavaScript it
# ships comes from the npm registry (website/package-lock.json), cached outside the clone (MLLM_JS_CACHE).
site-setup: $(SITE_VENV)/.installed

$(SITE_VENV)/.installed: requirements-site-lock.txt
	$(PYTHON) -m venv $(SITE_VENV)
	$(SPY) -m pip install --quiet --disable-pip-version-check -r requirements-site-lock.txt
	touch $@

site: site-setup  ## the course as a static website in build/site, from the committed notebooks (none is run)
	$(SPY) tools/site.py build

test-site: site  ## the built site in headless Chromium, offline: pages, links, images, math, widgets, search
	bash tools/browser-setup.sh $(SITE_VENV)
	$(SPY) tools/site_test.py

# Two nbval runs side by side, with one busy process besides, each under a perturbed numerical setup
# (tools/perturb.py) that stands in for another machine's last bits on this one: the learner's versions with
# another CPU's code paths (`kernels`), the lessons with one weight nudged by 1e-7 before
# training (`nudge`). Their outputs must hold under both, so an unperturbed run would only repeat what these
# compare; `make test-envs` runs each version once more, in another environment.
test-loaded: teach-setup  ## every notebook under nbval on a busy machine: the learner's versions under other CPU code paths, the lessons with a nudged weight
	$(TPY) tools/under_load.py --busy 1 -- $(TPY) tools/perturb.py --setup kernels=student/ --setup nudge=notebooks/

test-perturbed: teach-setup  ## the lessons' outputs compared under the two perturbed numerical setups only (NB=path for one)
	$(TPY) tools/perturb.py -- $(or $(NB),notebooks/)

test-smoke: setup  ## every notebook's full-size code paths (full data, models, plots), training capped to a few steps
	$(PY) tools/full_size.py smoke

test-full: setup  ## run every notebook at the full size (slow; a GPU helps): errors only, outputs not compared
	MLLM_QUICK=0 TQDM_DISABLE=1 $(PY) -m pytest --nbval-lax notebooks/

lint: setup
	$(VENV)/bin/ruff check .

sandbox-setup:  ## bubblewrap, the sandbox every graded submission runs in (installed when missing, as root)
	sh tools/sandbox-setup.sh

release: teach-setup  ## make the learner's versions (student/) and solutions pages (solutions/) from the lessons
	$(TPY) -m mllm_classroom release

grade: teach-setup sandbox-setup  ## grade SUBMISSIONS=zip or folder (Canvas, Moodle, one folder per student) into GRADES=folder
	$(TPY) -m mllm_classroom grade $(SUBMISSIONS) --out $(GRADES)

notebooks: setup  ## re-execute notebooks (NB=01_tokenization.ipynb for one) and save their outputs
	$(PY) tools/notebooks.py run $(NB)

headers: setup  ## rewrite every badge and Colab setup cell from pyproject.toml's Repository
	$(PY) tools/notebooks.py headers

benchmarks: teach-setup  ## the speed measurements quoted in the README (grading needs the teacher's nbgrader)
	for b in benchmarks/*.py; do $(TPY) $$b || exit 1; done

# jsonschema stays at 4.24.1: from 4.25 it imports rfc3987-syntax, which builds an IRI grammar (2.6 s here)
# in every process that loads nbformat (each nbgrader command, nbval, JupyterLab). Upgrade it when that's fixed.
lock: setup  ## record the versions now installed in .venv as the CI lock
	$(PY) -m pip freeze --all --exclude-editable | grep -v "^pip==" | sed -E 's/^torch==([0-9.]+)\+cpu$$/torch==\1/' > requirements-lock.txt

clean:
	rm -rf $(VENV) $(TEACH_VENV) $(SITE_VENV) build *.egg-info
