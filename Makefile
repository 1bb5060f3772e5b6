# coremap: `make run` starts the app on this machine, `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip

.PHONY: run test bench syslibs-run syslibs-test clean screenshots icons man

run: syslibs-run $(VENV)/.installed
	$(VENV)/bin/coremap $(ARGS)

# The layers and the one rule first (import-linter, contracts in pyproject.toml): a wrong import fails
# in a second, before the suite runs.
# Two runs (issue 31): the tests that move nothing of the machine's in parallel (pytest-xdist, a test file
# per worker, one worker more than the CPUs: a worker waiting on a child, a socket or a window leaves its
# CPU idle, and on this 2-CPU VM 3 workers took 139 s where 2 took 203 s and 4 took 169 s, back to back),
# then the `live` ones one at a time under the machine lock (tests/live.py). Each run's time is printed,
# so the next step can aim at the larger.
# Bytecode is written even where the caller's environment says not to (PYTHONDONTWRITEBYTECODE, set in
# some CI images and sandboxes): pytest then rewrites every test module's asserts anew in each process,
# 25 s of each worker's collection and of the live run's (12 s once cached), into __pycache__ folders
# the clone ignores (issue 31).
WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$((n + 1)))
# eatmydata (LD_PRELOAD) makes fsync return at once, for the test run only: the suite's pin journals, sessions
# and reports are fsync'ed as the product does (each journalled pin before its write), and on this VM's disk
# each isolate or include waited 0.4-0.5 s on its ~90 fsyncs. What a test checks is what a process reads
# back, never what survives a power cut. Where eatmydata is absent the suite runs as before, only slower
# (app/syslibs.py lists it with the test tools; three live files took 40 s with fsync, 22 s without) (issue 31).
EATMYDATA ?= $(shell command -v eatmydata 2>/dev/null)
test: syslibs-test $(VENV)/.installed-test
	$(VENV)/bin/lint-imports --no-cache
	@unset PYTHONDONTWRITEBYTECODE; start=$$(date +%s); \
	QT_QPA_PLATFORM=offscreen $(EATMYDATA) $(PY) -m pytest -q -m "not live" -n $(WORKERS) --dist loadfile --durations=10 $(PYTEST_ARGS); rc=$$?; \
	mid=$$(date +%s); \
	QT_QPA_PLATFORM=offscreen $(EATMYDATA) $(PY) -m pytest -q -m live --durations=10 $(PYTEST_ARGS); rc2=$$?; \
	end=$$(date +%s); \
	echo "coremap: tests not live: $$((mid - start)) s in parallel ($(WORKERS) workers); live set: $$((end - mid)) s serially"; \
	[ $$rc -eq 0 ] && [ $$rc2 -eq 0 ]

# Benchmarks print figures against a peer measured in the same run; never part of CI.
bench: $(VENV)/.installed-test
	$(PY) -m tests.benchmarks $(ARGS)

# The pictures of the README's issue-12 figures (IRQ marks, drag chip, empty and full probe plot),
# rendered offscreen into resources/screenshots/.
screenshots: $(VENV)/.installed-test
	QT_QPA_PLATFORM=offscreen $(PY) -m tests.shots

# The PNG icons (48, 128, 256) rendered from resources/io.github.coremap.Coremap.svg after it changes;
# tests/gui/test_desktop_icons.py fails while they are stale.
icons: $(VENV)/.installed-test
	QT_QPA_PLATFORM=offscreen $(PY) -m widgets.icons

# The manual page and the bash and zsh completion scripts, generated from the parser (coremap --man,
# --completion) after an option or a command changes; tests/unit/test_cli_docs.py fails while they are stale.
man: $(VENV)/.installed
	$(PY) -m app --man > man/coremap.1.new && mv man/coremap.1.new man/coremap.1
	$(PY) -m app --completion bash > completions/coremap.new && mv completions/coremap.new completions/coremap
	$(PY) -m app --completion zsh > completions/_coremap.new && mv completions/_coremap.new completions/_coremap

# The Debian/Ubuntu packages Qt (and the probes' build) need that are missing: as root they are
# installed (apt-get update, apt-get install -y); as a user the one `sudo apt-get install` line is
# printed and make stops.
syslibs-run:
	@$(PYTHON) app/syslibs.py run --install
syslibs-test:
	@$(PYTHON) app/syslibs.py test --install

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

NATIVE := $(wildcard probes/*.c probes/*.h probes/*/*.c) setup.py

$(VENV)/.installed: pyproject.toml $(NATIVE) | $(VENV)/bin/python
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(NATIVE) | $(VENV)/bin/python
	$(PIP) install -q -e '.[test]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) build *.egg-info probes/_native*.so
