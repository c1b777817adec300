# Developer commands live here and nowhere else. Every target does its own set-up on a fresh machine.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench bench-quick fuzz clean docs

$(STAMP): pyproject.toml analyzers/sketch/_sketch_scalar.c analyzers/traces/_kineto_columns.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

## make demo: a simulated fleet, agents, ingest, analyzers and the dashboard on an embedded DuckDB.
demo: $(STAMP)
	$(BIN)/fleetscope demo

## make test: lint, type-check, then the whole suite (real servers on loopback).
test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Two workers (pytest-xdist), each taking whole test files: a file is the unit the suite isolates
# (its Redis database, its module fixtures); session servers (S3, PostgreSQL database) are per
# worker. `make test PYTEST_ARGS=` runs it in one process.
PYTEST_ARGS ?= -n 2 --dist loadfile
pytest: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## make bench: every benchmark under bench/, each against its named peer in the same run.
bench: $(STAMP)
	$(BIN)/python -m bench

## make bench-quick: each peer comparison run small; fails if a ratio drops below the floor written
## next to it in bench/RESULTS.md. Not run by CI (timings there are noise).
bench-quick: $(STAMP)
	$(BIN)/python -m bench.quick

## make fuzz: the long mutation-fuzz runs: a real server's bodies, then the trace loader's C pass
## with trace bombs mixed in (gzip bombs, deep nesting, NaN/Infinity times: each must be refused)
## (FUZZ_CASES, FUZZ_SEED to change them).
fuzz: $(STAMP)
	$(BIN)/python -m bench.fuzz --cases $${FUZZ_CASES:-20000} $${FUZZ_SEED:+--seed $$FUZZ_SEED}
	$(BIN)/python -m bench.fuzz_traces --cases $${FUZZ_CASES:-20000} $${FUZZ_SEED:+--seed $$FUZZ_SEED}

docs: $(STAMP)
	COLUMNS=100 $(BIN)/python -m app.docgen docs

clean:
	rm -rf $(VENV) var .demo .pytest_cache .mypy_cache .ruff_cache
