# Two commands: `make demo` runs Hotspan with the instrumented agent stack; `make test` runs every test.
# Both build .venv from pyproject.toml first and install the Debian packages the tests drive.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)
DEBIAN_PACKAGES := chromium prometheus prometheus-alertmanager

.PHONY: demo test lint system-deps build-deps venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml collector/_otlp_rows.c | build-deps
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The install compiles collector/_otlp_rows.c: a C compiler and the Python headers.
build-deps:
	@missing=""; command -v cc >/dev/null 2>&1 || missing="gcc"; \
	$(PYTHON) -c "import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
		|| missing="$$missing python3-dev"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

system-deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do command -v $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

demo: $(STAMP)
	$(BIN)/hotspan demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# Three files at a time (each with its own embedded engine), then the timing tests alone; both always run. Three
# workers on two cores: with two, 13% of the CPU idled (workers waiting on their servers, subprocesses, browsers).
# Bytecode is cached even where the host sets PYTHONDONTWRITEBYTECODE: otherwise every Python process the tests
# start (servers, CLIs, the stack's parts) compiles Hotspan's sources again, about 1 s of CPU each.
test: $(STAMP) system-deps lint
	@unset PYTHONDONTWRITEBYTECODE; $(BIN)/pytest -n 3 --dist loadfile -m "not alone"; shared=$$?; \
	$(BIN)/pytest -m alone; alone=$$?; \
	[ $$shared -eq 0 ] && [ $$alone -eq 0 ]

clean:
	rm -rf $(VENV) .hotspan test-artifacts
