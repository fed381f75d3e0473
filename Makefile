# chunkwise: `make demo`, `make test`. Everything runs from .venv (created on first use).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.chunkwise-installed

.PHONY: install wordnet demo test test-fast lint format bench clean

install: $(STAMP)

# torch first, pinned to the CPU wheel on local disk (any other spec downloads gigabytes);
# re-runs only when pyproject.toml changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,embed,trees]'
	$(MAKE) --no-print-directory wordnet
	touch $@

# WordNet 3.0 for METEOR (NarrativeQA), from Debian's packages, copied where nltk reads it; never
# a runtime download. Without root it only says what to run, and METEOR's test skips.
wordnet:
	@test -f /usr/share/wordnet/data.noun || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends \
	      wordnet-base wordnet-sense-index >/dev/null; \
	  else echo "note: run 'sudo apt-get install wordnet-base wordnet-sense-index' then 'make wordnet' for METEOR"; fi; }
	@test ! -f /usr/share/wordnet/data.noun || $(BIN)/python -m chunkwise.eval.qa_metrics install-wordnet

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
