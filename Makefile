# Quick start: `make demo` runs the embedded default, `make test` runs the test suite.
# Both set themselves up: a venv in .venv with the project and its extras, and (as root) the
# Debian packages listed under .ci/apt/ that the real-peer tests need.
#
# As root the venv is Debian's /usr/bin/python3 (PYTHON overrides it): the suite runs the
# agent's tests as `nobody`, who cannot run an interpreter under /root (pyenv's), and it is
# the Python a Raspberry Pi OS node has. So `make test` and CI (.ci/run) run the same suite.
ROOT_PYTHON := $(if $(filter 0,$(shell id -u)),$(wildcard /usr/bin/python3))
PYTHON ?= $(or $(ROOT_PYTHON),python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS := controller,analysis,test,payload,stream,api,h3,study,uvloop

.PHONY: setup constraints system-packages demo test test-emulated test-stress coverage lint \
	mutation

# The venv is made once: re-running `venv` over it with another interpreter (a changed
# pyproject or constraints file, with PYTHON unset) would mix the two in one venv. pip's
# output goes to .venv/setup.log, shown when it fails.
$(STAMP): pyproject.toml constraints.txt
	@echo "setting up $(VENV) with $(PYTHON): the project and its extras ($(EXTRAS))"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@{ $(BIN)/pip install -q --upgrade pip \
		&& $(BIN)/pip install -q -c constraints.txt -e '.[$(EXTRAS)]'; } >$(VENV)/setup.log 2>&1 \
		|| { cat $(VENV)/setup.log; exit 1; }
	@touch $(STAMP)

# A venv that root's default interpreter did not make (an older checkout's, from pyenv) is
# made anew, once, saying so.
setup:
	@if [ "$(PYTHON)" = "$(ROOT_PYTHON)" ] && [ -n "$(ROOT_PYTHON)" ] && [ -f $(VENV)/pyvenv.cfg ] \
		&& ! grep -qx 'home = $(patsubst %/,%,$(dir $(ROOT_PYTHON)))' $(VENV)/pyvenv.cfg; then \
		echo "$(VENV) was made by another interpreter than $(ROOT_PYTHON): making it anew"; \
		rm -rf $(VENV); \
	fi
	@$(MAKE) --no-print-directory $(STAMP)

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
			echo "installing Debian packages the tests use: $$(echo $$missing)"; \
			log=$$(mktemp /tmp/h2iot-apt.XXXXXX); \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkgs; } \
				>$$log 2>&1 || { cat $$log; rm -f $$log; exit 1; }; \
			rm -f $$log; \
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
# (default: one more than the cores); `make test PYTEST_ARGS='-k config'` narrows every part.
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

# The emulated Raspberry Pi OS nodes' tests (marked `emulated`, not in `make test`): their
# roots are built first when missing or stale (debootstrap, 3 to 15 minutes cold, then cached
# under /var/cache/h2iot/rootfs), then deploys and sweeps run on the nodes under qemu-user.
# Needs root. .ci/run builds the roots beside `make test` and runs this after it.
test-emulated: setup system-packages
	@$(BIN)/python -m tests.emulated.rootfs
	@$(SUITE) --emulated $(PASS_ON)

# The whole suite, `make test` then `make test-emulated`, with a CPU burner on every core at
# the suite's own priority: no test may depend on how busy the machine is (tests/stress.py).
STRESS_TARGETS ?= test test-emulated
test-stress: setup system-packages
	@$(BIN)/python -m tests.stress -- $(MAKE) --no-print-directory $(STRESS_TARGETS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Mutation testing of the sans-IO cores that decide the numbers (not part of `make test`): one
# module at a time against its own unit tests (pyproject's [tool.mutmut]), niced, then the table
# (tests/mutation_report.py). Results are kept in mutants/: a rerun checks only what changed.
MUTATE := controller.meter.decoder controller.meter.protocol controller.energy analysis.stats \
	controller.sweep.plan agent.h2.flow agent.h2.settings
mutation: setup
	$(BIN)/pip install -q -e '.[mutation]'
	for module in $(MUTATE); do nice -n 19 $(BIN)/mutmut run "$$module.*" >/dev/null || exit 1; done
	$(BIN)/python tests/mutation_report.py
