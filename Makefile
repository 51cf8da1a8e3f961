# `make demo` runs the main job, `make test` runs the test suite; both create .venv when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/python examples/tour.py

test: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

bench: $(BIN)/.installed
	$(BIN)/python bench/compare.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
