# Two commands from a fresh clone: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-all bench bench-simgrid clean docs

$(PY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need Python 3.11 as '$(PYTHON)' (override with PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# The engine's kernels are compiled once here (numba caches them), so the first run costs no more than the next
$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install -q -e '.[test,bench]'
	@echo "compiling the engine's kernels (once, about a minute)"
	$(PY) -c "from netsim.engine.table import warm_up; warm_up()"
	@touch $(STAMP)

# --force: a second `make demo` replaces the first one's results (files added there are kept)
demo: $(STAMP)
	$(VENV)/bin/netsim run experiments/quickstart.yaml --out results/quickstart --force

# the suite on every core (pytest-xdist), a test file per worker: a file's module fixtures run once
test: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadfile

test-all: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadfile -m ''

# All scenarios take ~25 minutes on 2 cores with NETSIM_BENCH_TIMEOUT=420 (seconds per scenario);
# pick some with: make bench BENCH="ring-256 s3-alltoall-256"
bench: $(STAMP)
	$(PY) benchmarks/run.py $(BENCH)

# SimGrid 4.x on the same scenario files, next to netsim's numbers (benchmarks/simgrid/README.md);
# SimGrid is not a dependency: without it this says how to install it
bench-simgrid: $(STAMP)
	$(PY) benchmarks/simgrid/run.py $(BENCH)

clean:
	rm -rf $(VENV) results .pytest_cache .hypothesis

# The documentation site (mkdocs.yml; the CLI and experiment-file references are generated from the
# code by docs/hooks.py), built strictly into /tmp/netsim-site; `make test` builds it too. First the
# demo runs and the README's picture of its dashboard is taken from it (docs/figures.py; needs chromium)
docs: $(STAMP)
	$(VENV)/bin/netsim run experiments/quickstart.yaml --out results/quickstart --force
	$(PY) docs/figures.py results/quickstart
	$(VENV)/bin/mkdocs build --strict
