# Quick start: `make demo` runs the embedded default, `make test` runs the test suite.
# Both set themselves up: a venv in .venv with the project and its extras, and (as root) the
# Debian packages listed under .ci/apt/ that the real-peer tests need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS := controller,analysis,test,payload,stream,api,h3,study,uvloop

.PHONY: setup constraints system-packages demo test coverage lint mutation

# The venv is made once: re-running `venv` over it with another interpreter (a changed
# pyproject or constraints file, with PYTHON unset) would mix the two in one venv.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

setup: $(STAMP)

# Re-pins constraints.txt to the newest releases pyproject allows (then run `make test`).
constraints:
	rm -rf /tmp/h2iot-constraints && $(PYTHON) -m venv /tmp/h2iot-constraints
	/tmp/h2iot-constraints/bin/pip install -q -e '.[$(EXTRAS)]'
	{ sed -n '/^#/p' constraints.txt; /tmp/h2iot-constraints/bin/pip freeze --exclude-editable \
		| grep -v '^h2iot'; } > constraints.txt.new && mv constraints.txt.new constraints.txt

# Installs the listed Debian packages that are missing; without root it names them instead.
system-packages:
	@missing=$$(grep -hv '^\s*#' .ci/apt/*.txt | xargs -r dpkg-query -W -f='$${Package} $${Status}\n' 2>&1 \
		| awk '!/install ok installed/ {print $$1}' | sed 's/^dpkg-query://' ); \
	pkgs=$$(grep -hv '^\s*#' .ci/apt/*.txt | tr '\n' ' '); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkgs; \
		else \
			echo "note: tests that need these Debian packages will be skipped: $$pkgs"; \
		fi; \
	fi

demo: setup
	$(BIN)/h2iot sweep configs/local.toml

# The suite in parts side by side, then the timing tests alone, then the 15 slowest tests
# and one line per part (tests/suite.py says how it is cut; as root the agent's
# and analysis's tests run as nobody, the way a Pi runs its agent). With CI set (.ci/run sets
# it) the same run is under coverage: `make coverage`. TEST_JOBS workers for the main part
# (default: twice the cores); `make test PYTEST_ARGS='-k config'` narrows every part.
TEST_JOBS ?=
PYTEST_ARGS ?=
SUITE = $(BIN)/python -m tests.suite $(if $(TEST_JOBS),--jobs $(TEST_JOBS))
PASS_ON = $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS))
test: setup system-packages
	@if [ -n "$$CI" ]; then $(MAKE) --no-print-directory coverage; else $(SUITE) $(PASS_ON); fi

# `make test` under coverage, child processes included (the agents, the CLI and the other
# Python children: pyproject's [tool.coverage.run]), then a line per package.
coverage: setup system-packages
	@$(SUITE) --coverage $(PASS_ON)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Mutation testing of the sans-IO cores that decide the numbers (not part of `make test`): one
# module at a time against its own unit tests (pyproject's [tool.mutmut]), niced, then the table
# (tests/mutation_report.py). Results are kept in mutants/: a rerun checks only what changed.
MUTATE := controller.meter.decoder controller.meter.protocol controller.energy analysis.stats \
	controller.sweep.plan agent.flow agent.settings
mutation: setup
	$(BIN)/pip install -q -e '.[mutation]'
	for module in $(MUTATE); do nice -n 19 $(BIN)/mutmut run "$$module.*" >/dev/null || exit 1; done
	$(BIN)/python tests/mutation_report.py
