# The two set-up commands of the README: `make reproduce` (main job) and `make test` (test suite).
# Each creates .venv on first use (or when pyproject.toml changes) and installs what it needs:
# rfa with its experiments for the main job, and the test and docs tools besides for the tests.
# uv installs them (from PyPI, as pip would: the same releases), compiling their bytecode as pip does: a fresh .venv
# in 42 s, where pip took 75 s, each with an empty download cache (2026-12-03). Without the bytecode, every process
# compiled JAX's sources anew where PYTHONDONTWRITEBYTECODE is set (as on this project's machines): `import jax`
# took 4.3 s, not 1.8 s. pip stays in .venv for tests/test_packaging.py's wheel.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
WORKDIR ?= workdir
# pytest-xdist processes for `make test`; each test file runs whole on one worker (its shared fixtures too).
# A worker that crashes fails its test and is not restarted: with --dist loadfile, pytest-xdist restarting crashed
# workers re-ran the crashing test and then hung with its live workers idle. --no-loadscope-reorder: pytest-xdist 3.8
# would hand out the files with most tests first, over tests/conftest.py's longest-first order.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --max-worker-restart=0

.PHONY: reproduce test test-fast mutation docs benchmark lint

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip 'uv>=0.9'

$(VENV)/.installed-experiments: pyproject.toml | $(VENV)/bin/python
	$(PY) -m uv pip install --quiet --compile-bytecode --python $(PY) -e '.[experiments]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(VENV)/bin/python
	$(PY) -m uv pip install --quiet --compile-bytecode --python $(PY) -e '.[test]'
	touch $@ $(VENV)/.installed-experiments

reproduce: $(VENV)/.installed-experiments
	$(PY) -m rfa.experiments.reproduce --workdir $(WORKDIR)/reproduce

# rfa's own bytecode, compiled once (the tests start many Python processes, each of which would compile rfa's
# sources where PYTHONDONTWRITEBYTECODE is set: 0.8 s of CPU each for the training stack).
COMPILE_RFA := $(PY) -m compileall -q rfa

test: $(VENV)/.installed-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(COMPILE_RFA)
	$(PY) -m pytest $(XDIST)

# The fast tier, before every commit: lint and the tests not marked slow (the reproductions, benchmarks, studies,
# multi-process and end-to-end runs are left to `make test`).
test-fast: $(VENV)/.installed-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(COMPILE_RFA)
	$(PY) -m pytest $(XDIST) -m "not slow"

# mutmut's mutants of rfa/attention and rfa/random_features against their fast tests ([tool.mutmut] in pyproject.toml):
# a fixed sample of MUTATION_FRACTION of them (the whole set takes about 1.5 days here), then the score and the
# survivors; `$(PY) -m mutmut show NAME` prints one. The report is in docs/development.md, "Mutation testing".
MUTATION_FRACTION ?= 0.02
mutation: $(VENV)/.installed-test
	$(PY) tools/mutation_sample.py --fraction $(MUTATION_FRACTION)

docs: $(VENV)/.installed-test
	$(PY) -m sphinx -W --keep-going -q -b html docs $(WORKDIR)/docs/html

benchmark: $(VENV)/.installed-experiments
	$(PY) -m rfa.experiments.benchmarks.attention
	$(PY) -m rfa.experiments.benchmarks.mse
	$(PY) -m rfa.experiments.benchmarks.decoding
	$(PY) -m rfa.experiments.benchmarks.flax_decoding
	$(PY) -m rfa.experiments.benchmarks.checks
	$(PY) -m rfa.experiments.benchmarks.relative
	$(PY) -m rfa.experiments.benchmarks.delta_rule
	$(PY) -m rfa.experiments.benchmarks.precision
	$(PY) -m rfa.experiments.benchmarks.prefill
	$(PY) -m rfa.experiments.benchmarks.train_step

lint: $(VENV)/.installed-test
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .
