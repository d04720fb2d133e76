# Parley: `make run` serves on 127.0.0.1:8000, `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test check lint typecheck pytest migrate openapi bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

migrate: $(STAMP)
	$(BIN)/alembic upgrade head

run: migrate
	$(BIN)/uvicorn --factory app.main:create_app --host $(HOST) --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest --cov=app --cov-branch --cov-report=term --cov-report=term:skip-covered \
		--cov-fail-under=80 tests
	$(BIN)/coverage report --include='app/domain/*' --fail-under=90

check: lint typecheck pytest

test: check

openapi: $(STAMP)
	$(BIN)/python -m app.openapi_export openapi/openapi.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage
