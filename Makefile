# Every target creates the virtual environment it needs. `make test` is what CI runs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATASET ?= govreport
SOURCES ?=
OUT ?= out
SEED ?= 0
BUILD_ARGS ?=
SCORE_ARGS ?=
# make table3 MODELS="gme-qwen2-vl-2b qwen3-vl-2b" DATASET=mmlongembed [TINY=1: the CPU dry run on tiny models]
MODELS ?= gme-qwen2-vl-2b
TINY ?=
TABLE3_ARGS ?=
# e.g. make push DATASET=govreport PUSH_ARGS="--repo org/mmlongembed --version 1.0.0"
PUSH_ARGS ?=

.PHONY: venv build-dataset validate test browser bench bench-scale bench-score score table3 push readme clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU build of torch first, so no extra below pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[test,harness,mteb,ray,video,pdf,evidence]"
	# colpali_engine (ColQwen2.5's reference, tests/harness/profiles/test_profile_colqwen.py) without its torchvision: the PyPI
	# torchvision wheel is a CUDA build that breaks `import transformers` beside the CPU torch. Its other
	# requirements (peft, scipy) are in the extras; tests/support/profile_references.py imports it without torchvision.
	$(BIN)/python -m pip install --quiet --no-deps colpali-engine==0.3.18
	touch $(STAMP)

venv: $(STAMP)

build-dataset: $(STAMP)
	$(BIN)/mmle build $(DATASET) --output $(OUT) --seed $(SEED) $(if $(SOURCES),--sources $(SOURCES),) $(BUILD_ARGS)

validate: $(STAMP)
	$(BIN)/mmle validate $(OUT)/$(DATASET)

# The explorer's browser tests need a Chromium: Debian's package, installed only where none is on
# the PATH and apt-get exists (CI runs as root on a clean Debian machine; elsewhere they skip).
browser:
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
		&& command -v apt-get >/dev/null 2>&1; then \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; \
	fi

test: $(STAMP) browser
	$(BIN)/python -m pytest -q tests

bench: $(STAMP)
	$(BIN)/python bench/token_counter.py
	$(BIN)/python bench/bm25.py
	$(BIN)/python bench/harness_throughput.py
	$(BIN)/python bench/hotpotqa_build.py
	$(BIN)/python bench/release_build.py
	$(BIN)/python bench/read_memory.py

# Scoring throughput on CPU with a tiny model: padding, loader workers, Ray (bench/score_throughput.py)
# make bench-score BENCH_SCORE_ARGS="--family qwen3_vl --end-to-end-pools 'mmlongbench-*' 'govreport-*'"
BENCH_SCORE_ARGS ?=
bench-score: $(STAMP)
	$(BIN)/python bench/score_throughput.py $(BENCH_SCORE_ARGS)

# Every builder at the paper's size (hours on 2 cores; docs/SCALE.md). A short run:
# make bench-scale SCALE_ARGS="--scale 0.1 --builders govreport hotpotqa"
SCALE_ARGS ?=
bench-scale: $(STAMP)
	$(BIN)/python bench/paper_scale.py $(SCALE_ARGS)

score: $(STAMP)
	$(BIN)/mmle score --dataset $(OUT)/$(DATASET) $(SCORE_ARGS)

table3: $(STAMP)  # the listed profiles over $(OUT)/$(DATASET); leaderboard beside the paper's rows
	$(BIN)/python -m harness.table3 --dataset $(OUT)/$(DATASET) --models "$(MODELS)" --output results/table3 \
		$(if $(TINY),--tiny,) $(TABLE3_ARGS)

push: $(STAMP)
	$(BIN)/mmle push $(OUT)/$(DATASET) $(PUSH_ARGS)

readme: $(STAMP)  # the README's builder tables, from each builder's summary and source_formats
	$(BIN)/python -m mmlongembed.readme

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache
