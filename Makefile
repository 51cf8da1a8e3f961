# `make demo` runs the main job (the demo pipeline on Spark local mode), `make test` the test suite;
# both create .venv when missing. `make tour` runs examples/tour.py, a tour of the messaging patterns.
# `make test-cluster` runs the tests marked `cluster` (not in `make test`): topologies on a Spark
# standalone cluster (a Master and two Workers) it starts from pyspark's own spark-class; its
# live word count that loses an executor gets RECOVERY_SECONDS (default 60) of input.
# `make fuzz` runs every fuzz target (fuzz/) for FUZZ_SECONDS each (default 60).
# `make pyzmq-suite` runs pyzmq 27.3.0's own test suite, unmodified, against pyzmq and against
# brokerless through the `zmq` alias; `make pyzmq-examples` does the same for pyzmq's examples.
# Both install the `pyzmq-suite` extra and write their reports to .cache/pyzmq/report/.
# `make docs` builds the documentation site (docs/, mkdocs.yml) into site/, warnings as errors.
# `make test-recovery` runs the live exactly-once recovery test (local, multi-process and Spark
# local mode) for RECOVERY_SECONDS (default 60) of input, where the default suite sends for 3 s.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo tour test docs test-cluster test-recovery lint bench fuzz clean pyzmq-suite pyzmq-examples

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

RECOVERY_SECONDS ?= 60

test-cluster: $(BIN)/.installed
	BROKERLESS_RECOVERY_SECONDS=$(RECOVERY_SECONDS) $(BIN)/python -m pytest -q -m cluster tests/test_spark_cluster.py

docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test-recovery: $(BIN)/.installed
	BROKERLESS_RECOVERY_SECONDS=$(RECOVERY_SECONDS) $(BIN)/python -m pytest -q tests/test_stream_state_recovery.py

$(BIN)/.installed-pyzmq-suite: pyproject.toml $(BIN)/.installed
	$(BIN)/python -m pip install -q -e '.[test,pyzmq-suite]'
	touch $@

pyzmq-suite: $(BIN)/.installed-pyzmq-suite
	$(BIN)/python tools/pyzmq_suite.py

pyzmq-examples: $(BIN)/.installed-pyzmq-suite
	$(BIN)/python tools/pyzmq_examples.py

bench: $(BIN)/.installed
	$(BIN)/python bench/compare.py

FUZZ_SECONDS ?= 60

$(BIN)/.fuzz-installed: $(BIN)/.installed
	$(BIN)/python -m pip install -q -e '.[fuzz]'
	touch $@

fuzz: $(BIN)/.fuzz-installed
	$(BIN)/python -m fuzz.run --seconds $(FUZZ_SECONDS)

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .fuzz
