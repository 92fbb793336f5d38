# One command each for a fresh machine: `make test` and `make demo`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint typecheck layers pytest topology bench sim clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,forensics]'
	touch $(STAMP)

venv: $(STAMP)

# The real daemon, driven by the built-in kubelet simulator on a synthetic 96-CPU node.
demo: $(STAMP)
	$(BIN)/qrmd demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck layers pytest

topology: $(STAMP)
	$(BIN)/qrmd topology --topology synthetic:cpus=96,sockets=2,numas=4

# Benchmarks print figures; they are measurements, not tests.
bench: $(STAMP)
	for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# The deterministic simulation, longer than the test suite's few seeds (docs/simulation.md):
# SIM_SEEDS seeds of SIM_STEPS steps, every fault kind; a failing seed prints its replay.
SIM_SEEDS ?= 200
SIM_STEPS ?= 1000
sim: $(STAMP)
	@failed=0; for seed in $$(seq 0 $$(($(SIM_SEEDS) - 1))); do \
		$(BIN)/qrmd sim run --seed $$seed --steps $(SIM_STEPS) || failed=$$((failed + 1)); \
	done; echo "$(SIM_SEEDS) seeds x $(SIM_STEPS) steps: $$failed failed"; test $$failed -eq 0

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
