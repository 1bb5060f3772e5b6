# coremap: `make run` starts the app on this machine, `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip

.PHONY: run test bench syslibs-run syslibs-test clean screenshots

run: syslibs-run $(VENV)/.installed
	$(VENV)/bin/coremap $(ARGS)

test: syslibs-test $(VENV)/.installed-test
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q $(PYTEST_ARGS)

# Benchmarks print figures against a peer measured in the same run; never part of CI.
bench: $(VENV)/.installed-test
	$(PY) -m tests.benchmarks $(ARGS)

# Says which Debian/Ubuntu packages Qt needs and are missing, by name, and stops.
syslibs-run:
	@$(PYTHON) app/syslibs.py run
syslibs-test:
	@$(PYTHON) app/syslibs.py test

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: pyproject.toml $(wildcard probes/*.c probes/*.h) | $(VENV)/bin/python
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(wildcard probes/*.c probes/*.h) | $(VENV)/bin/python
	$(PIP) install -q -e '.[test]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) build *.egg-info probes/_native*.so
