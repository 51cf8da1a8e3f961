# `make demo` runs the main job (the demo pipeline on Spark local mode), `make test` the test suite;
# both create .venv when missing. `make tour` runs examples/tour.py, a tour of the messaging patterns.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo tour test lint bench clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/python -m brokerless.spark.demo

tour: $(BIN)/.installed
	$(BIN)/python examples/tour.py

test: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

bench: $(BIN)/.installed
	$(BIN)/python bench/compare.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
