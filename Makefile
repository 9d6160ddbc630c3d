# Quick start: `make demo` runs the embedded default, `make test` runs the test suite.
# Both set themselves up: a venv in .venv with the project and its extras, and (as root) the
# Debian packages listed under .ci/apt/ that the real-peer tests need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup system-packages demo test coverage lint mutation

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[controller,analysis,test,payload,stream,api]'
	touch $(STAMP)

setup: $(STAMP)

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

# With CI set (.ci/run sets it) the same tests run under coverage: `make coverage`.
test: setup system-packages
	@if [ -n "$$CI" ]; then $(MAKE) --no-print-directory coverage; exit $$?; fi; \
	$(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; exit 1; fi; \
	exit $$rc

# `make test` under coverage, child processes included (the agents, the controller's CLI, the
# virtual meter: pyproject's [tool.coverage.run]), then a line per package. The data go to a
# directory every user may write to (some tests run as nobody).
# As root, the part of the suite that needs no root (UNPRIVILEGED_PART) runs as UNPRIVILEGED_USER,
# as a Pi's agent runs (tests marked `root` there skip, and run as root with the rest); the venv's
# interpreter must be one that user can reach (.ci/run uses Debian's).
UNPRIVILEGED_PART := tests/agent tests/analysis
UNPRIVILEGED_USER ?= nobody
coverage: setup system-packages
	@data=$$(mktemp -d /tmp/h2iot-coverage.XXXXXX) && chmod 1777 $$data && \
	run="$(BIN)/python -m coverage run -m pytest"; \
	if [ "$$(id -u)" != 0 ]; then \
		COVERAGE_FILE=$$data/.coverage $$run; rc=$$?; \
	else \
		COVERAGE_FILE=$$data/.coverage $$run $(addprefix --ignore=,$(UNPRIVILEGED_PART)); rc=$$?; \
		COVERAGE_FILE=$$data/.coverage $$run -m root $(UNPRIVILEGED_PART); part=$$?; \
		[ $$part -eq 5 ] && part=0; [ $$rc -eq 0 ] && rc=$$part; \
		mkdir $$data/home && chown $(UNPRIVILEGED_USER) $$data/home; \
		as_user="setpriv --reuid=$(UNPRIVILEGED_USER) --regid=$$(id -g $(UNPRIVILEGED_USER)) --clear-groups env HOME=$$data/home"; \
		if ! $$as_user $(BIN)/python -c pass; then \
			echo "$(UNPRIVILEGED_USER) cannot run $(BIN)/python: make the venv with an interpreter outside /root (PYTHON=/usr/bin/python3)" >&2; rc=1; \
		else \
			COVERAGE_FILE=$$data/.coverage $$as_user $$run -p no:cacheprovider $(UNPRIVILEGED_PART); part=$$?; \
			[ $$rc -eq 0 ] && rc=$$part; \
		fi; \
	fi; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; rc=1; fi; \
	COVERAGE_FILE=$(CURDIR)/.coverage $(BIN)/python -m coverage combine -q $$data && rm -rf $$data; \
	echo "coverage of statements, child processes included:"; \
	for package in agent controller analysis; do \
		printf '  %-10s %s %%\n' $$package \
			"$$($(BIN)/python -m coverage report --include="$(CURDIR)/$$package/*" --format=total)"; \
	done; \
	printf '  %-10s %s %%\n' all "$$($(BIN)/python -m coverage report --format=total)"; \
	exit $$rc

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
