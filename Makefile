# `make demo` runs the main job (the demo pipeline on Spark local mode), `make test` the test suite;
# both create .venv when missing. `make tour` runs examples/tour.py, a tour of the messaging patterns.
# `make test-all` runs the suite on CPython 3.10, 3.11, 3.12 and 3.13 in turn (noxfile.py).
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
# Set-up installs with uv: it downloads and builds in parallel and shows what it is doing.
# The venv is made without pip (ensurepip alone takes 10-35 s here); $(PY)'s pip brings uv into
# it, and uv pip, which the other targets and people use.  uv uses the interpreters it is
# given, never one it would download.
UV := $(BIN)/uv
UV_PIP := UV_PYTHON_DOWNLOADS=never $(UV) pip install --python $(BIN)/python
# $(call install,ARGS): from uv's cache alone when it holds all that is needed, else from the
# index.  Where the index's answers carry no caching headers (as on these machines) uv keeps
# nothing it downloaded for later, so each new venv would download and build PySpark again:
# 1-2 minutes, against seconds from the cache.
install = @echo "uv pip install $(1)"; $(UV_PIP) --offline -q $(1) 2>/dev/null && echo "  (all from uv's cache)" || $(UV_PIP) $(1)
DEMO := the top words of The Adventures of Sherlock Holmes, counted live by a topology on Spark local mode

.PHONY: demo tour test test-all test-slow docs test-cluster test-recovery lint bench fuzz clean pyzmq-suite pyzmq-examples

$(UV):
	test -x $(BIN)/python || $(PY) -m venv --without-pip $(VENV)
	$(PY) -m pip --python $(BIN)/python install --disable-pip-version-check uv
	$(call install,pip)

$(BIN)/.installed: pyproject.toml $(UV)
	$(call install,-e '.[test]')
	touch $@

# The demo needs only the spark extra: a smaller first set-up than the test suite's.
$(BIN)/.installed-demo: pyproject.toml $(UV)
	$(call install,-e '.[spark]')
	touch $@

demo:
	@echo "make demo: $(DEMO)."
	@test -f $(BIN)/.installed-demo || echo "Setting up .venv first (brokerless, PySpark; a minute or two the first time) ..."
	@$(MAKE) --no-print-directory $(BIN)/.installed-demo
	$(BIN)/python -m brokerless.spark.demo

tour: $(BIN)/.installed
	$(BIN)/python examples/tour.py

# Two pytest workers (pytest-xdist), each taking whole test files (a file's Spark session and
# other module fixtures stay in one process): most of the suite's time is waiting on real
# processes, JVMs and timeouts, so two workers halve it on a 2-core machine.  TEST_WORKERS=0
# runs it in one process.
TEST_WORKERS ?= 2

test: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The suite on each CPython from 3.10 to 3.13, one after another, each in its own venv (.nox/);
# pyenv's shims answer python3.X only for the versions PYENV_VERSION lists, so it lists them.
# PYTEST_ARGS narrows the run, e.g. make test-all PYTEST_ARGS="tests/test_cli.py -x".
$(BIN)/.installed-nox: $(UV)
	$(call install,'nox>=2025.2')
	touch $@

test-all: $(BIN)/.installed-nox
	PYENV_VERSION="$$(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[0-3]\.[0-9]+$$' | paste -sd: -)" \
	    UV_PYTHON_DOWNLOADS=never $(BIN)/nox -- $(PYTEST_ARGS)

RECOVERY_SECONDS ?= 60

# The end-to-end runs marked slow (see pyproject.toml): run them before resolving an issue.
test-slow: $(BIN)/.installed
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m slow

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
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .fuzz .nox
