# Parley: `make run` serves on 127.0.0.1:8000, `make test` runs every check, `make coverage`
# the suite under coverage with its gates.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# The locks: every package pinned with its hashes, for any platform (uv's universal resolution).
# requirements.lock is what the service needs (the Dockerfile); requirements-dev.lock adds the
# tools (make, CI). Regenerate both with `make lock` after changing pyproject.toml.
LOCK := requirements.lock
DEV_LOCK := requirements-dev.lock
UV_COMPILE = $(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 \
	--generate-hashes --custom-compile-command 'make lock'

.PHONY: run test check coverage lint typecheck pytest migrate openapi settings-doc lock bench clean

# Plain pip installs the lock: a fresh machine needs nothing but python3 and make.
$(STAMP): $(DEV_LOCK) pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing the locked dependencies into $(VENV) (the first time takes a minute)..."
	$(BIN)/python -m pip install --progress-bar on --require-hashes --no-deps -r $(DEV_LOCK)
	$(BIN)/python -m pip install --no-deps -e .
	touch $(STAMP)

lock: $(STAMP)
	$(UV_COMPILE) -o $(LOCK)
	$(UV_COMPILE) --extra dev --constraint $(LOCK) -o $(DEV_LOCK)

migrate: $(STAMP)
	$(BIN)/alembic upgrade head

# asyncio's event loop, which takes in every waiting connection at once (docs/deploy.md, "The
# event loop"); httptools with a bounded request head: 64 KiB, complete within 10 s ("Request
# heads").
run: migrate
	$(BIN)/uvicorn --factory app.main:create_app --host $(HOST) --port $(PORT) \
		--loop asyncio --http app.server:BoundedHttpToolsProtocol \
		--proxy-headers --timeout-graceful-shutdown 30

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The tests run in parallel (pytest-xdist), each worker with its own databases
# (tests/conftest.py); the browser tests share one worker (one chromium at a time), the longest
# tests start first, and the uvicorn processes tests start are forked from a process that
# imported the app once (tests/forkserver.py). Much of the suite waits (on servers, browsers,
# leases), so more workers than cores finish sooner, but each costs CPU: on 2 cores `make test`
# took 4m19s with 4 workers and 4m35s with 6 (2026-11-27). PYTEST_WORKERS=0 runs the tests in
# this process, as plain `pytest` does.
PYTEST_WORKERS ?= 4
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): every
# worker and each of the ~100 uvicorn processes the suite starts would compile the same modules
# again (and pytest rewrite the same test modules' asserts), 3 s of CPU a worker.
PYTEST = PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup

pytest: $(STAMP)
	$(PYTEST) tests

check: lint typecheck pytest

# The linters and the tests side by side (much of the suite waits on servers and browsers, so
# mypy's half-minute fits in its idle CPU); each one's output printed whole when it is done.
test: $(STAMP)
	$(MAKE) --no-print-directory -j3 --output-sync=target lint typecheck pytest

# The suite again under coverage, with its gates: coverage's tracer makes the in-process code
# ~70% slower on Python 3.11 (no sys.monitoring), so it is a target of its own, run by CI
# after `make test`. The browser tests are left out of it: they measure no Python the API tests
# do not, they ran (and had to pass) in `make test` just before, and a chromium beside a traced
# server on 2 busy cores made their timing the run's only flakiness.
coverage: $(STAMP)
	$(PYTEST) --cov=app --cov-branch --cov-report=term --cov-report=term:skip-covered \
		--cov-fail-under=80 --ignore=tests/browser tests
	$(BIN)/coverage report --include='app/domain/*' --fail-under=90
	$(BIN)/coverage report --include='app/runs/*' --fail-under=90

openapi: $(STAMP)
	$(BIN)/python -m app.openapi_export openapi/openapi.json

settings-doc: $(STAMP)
	$(BIN)/python -m app.settings_doc

# The benchmarks (docs/performance.md): the stream path, then the event log's cost and cancel
# across processes (docs/runs.md), the cached share of a long conversation's input (docs/providers.md).
# BENCH_ARGS=--quick for one round of the stream benchmark.
bench: $(STAMP)
	$(BIN)/python -m bench.stream $(BENCH_ARGS)
	$(BIN)/python bench/runlog.py
	$(BIN)/python bench/cancel.py
	$(BIN)/python -m bench.cache

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage
