# The product's front door: `make demo` and `make test` set themselves up from nothing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint unit reliability format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,semantic]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/engram-memory demo

lint: $(STAMP)
	$(BIN)/ruff format --check src tests bench
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest

test: lint unit

# Issue 14's adversarial suite at its full size, then its summary table (a short form runs in `unit`).
reliability: $(STAMP)
	rm -f .reliability.jsonl
	ENGRAM_RELIABILITY=full ENGRAM_RELIABILITY_REPORT=.reliability.jsonl $(BIN)/pytest tests/reliability tests/mcp/test_multiprocess.py
	$(BIN)/python -m tests.reliability.summary .reliability.jsonl

format: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .reliability.jsonl
