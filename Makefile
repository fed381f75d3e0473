# chunkwise: `make demo`, `make test`. Everything runs from .venv (created on first use).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.chunkwise-installed

.PHONY: install demo test test-fast lint format bench clean

install: $(STAMP)

# torch first, pinned to the CPU wheel on local disk (any other spec downloads gigabytes);
# re-runs only when pyproject.toml changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,embed,trees]'
	touch $@

demo: install
	$(BIN)/chunkwise demo

test: install
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow"

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

format: install
	$(BIN)/ruff check --fix src tests bench
	$(BIN)/ruff format src tests bench

bench: install
	$(BIN)/python bench/llm_throughput.py
	$(BIN)/python bench/chunker_speed.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
