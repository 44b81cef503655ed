# The two set-up commands of the README: `make reproduce` (main job) and `make test` (test suite).
# Each creates .venv on first use (or when pyproject.toml changes) and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
WORKDIR ?= workdir
# pytest-xdist processes for `make test`; each test file runs whole on one worker (its shared fixtures too).
TEST_WORKERS ?= 2

.PHONY: reproduce test benchmark lint

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

reproduce: $(VENV)/.installed
	$(PY) -m experiments.reproduce --workdir $(WORKDIR)/reproduce

test: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

benchmark: $(VENV)/.installed
	$(PY) -m experiments.benchmark_attention
	$(PY) -m experiments.benchmark_mse
	$(PY) -m experiments.benchmark_decoding

lint: $(VENV)/.installed
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .
