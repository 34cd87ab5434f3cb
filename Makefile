# Two commands for a newcomer: `make run` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: run test bench lint typecheck clean migrate

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/tollgate serve --host $(HOST) --port $(PORT)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks
	$(BIN)/python -m benchmarks.ledger
	$(BIN)/python -m benchmarks.affinity
	$(BIN)/python -m benchmarks.caching
	$(BIN)/python -m benchmarks.classifier

# Throughput at c=64 with --workers 1 and 2 (about a minute: two gateways, each started and warmed).
.PHONY: bench-workers bench-soak bench-compare
bench-workers: $(STAMP)
	$(BIN)/python -m benchmarks.workers

# 100k mixed requests through one worker, RSS every 10k (a few minutes). SOAK_REQUESTS=20000 for less.
bench-soak: $(STAMP)
	$(BIN)/python -m benchmarks.soak --requests $${SOAK_REQUESTS:-100000}

# The same scenarios through LiteLLM's proxy, installed on first use into its own venv (kept out of
# the project's); prints Tollgate vs LiteLLM ratios. BENCH_ARGS=--quick for a short run.
LITELLM_VENV ?= .venv-litellm
$(LITELLM_VENV)/bin/litellm:
	$(PYTHON) -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/pip install --quiet 'litellm[proxy]'

bench-compare: $(STAMP) $(LITELLM_VENV)/bin/litellm
	$(BIN)/python -m benchmarks.compare --litellm $(LITELLM_VENV)/bin/litellm $(BENCH_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# A random, longer search for inputs that break the gateway (tests/hardening/profiles.py); `make test`
# runs a bounded one. TOLLGATE_FUZZ_EXAMPLES=5000 make fuzz searches harder.
.PHONY: fuzz
fuzz: $(STAMP)
	TOLLGATE_FUZZ_PROFILE=long TOLLGATE_FUZZ_EXAMPLES=$${TOLLGATE_FUZZ_EXAMPLES:-1000} $(BIN)/pytest -q tests/hardening

migrate: $(STAMP)
	$(BIN)/tollgate migrate

clean:
	rm -rf $(VENV) $(LITELLM_VENV) .pytest_cache .mypy_cache .ruff_cache tollgate.db tollgate-spool

# Hostile clients and failing dependencies against the real PostgreSQL and Redis (tests/chaos/), with
# the per-scenario table printed; `make test` runs the same at default sizes. TOLLGATE_CHAOS_SCALE=5
# make chaos runs bigger ones. It restarts PostgreSQL and Redis: not while someone else relies on them.
.PHONY: chaos
chaos: $(STAMP)
	$(BIN)/pytest -s tests/chaos
