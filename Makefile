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
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache tollgate.db tollgate-spool
