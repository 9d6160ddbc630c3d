# Quick start: `make demo` runs the embedded default, `make test` runs the test suite.
# Both set themselves up: a venv in .venv with the project and its extras, and (as root) the
# Debian packages listed under .ci/apt/ that the real-peer tests need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup system-packages demo test lint

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[controller,analysis,test]'
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

test: setup system-packages
	$(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; exit 1; fi; \
	exit $$rc

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
