# The two commands of the README: `make demo` and `make test`. Everything they need is installed here.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export UV_PYTHON_DOWNLOADS := never
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Byte-compile at install: the first `scanwatch sync` or code-server start does not pay for it.
export UV_COMPILE_BYTECODE := 1

.PHONY: install demo test lint prom-tools bench bench-quick bench-scale soak clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	@$(PYTHON) -m uv --version >/dev/null 2>&1 || $(PYTHON) -m pip install -q uv
	$(PYTHON) -m uv venv -q --allow-existing -p $(PYTHON) $(VENV)
	$(PYTHON) -m uv pip install -q -p $(VENV) -e '.[dev]' -c constraints.txt
	@touch $@

# Prometheus, promtool, Alertmanager and amtool from Debian's packages (the end-to-end tests need them).
prom-tools:
	@if command -v promtool >/dev/null && command -v prometheus >/dev/null && command -v prometheus-alertmanager >/dev/null; then \
	  echo "prometheus tools: present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager >/dev/null; \
	else \
	  echo "prometheus tools missing: run 'sudo apt-get install prometheus prometheus-alertmanager' (Debian/Ubuntu)"; exit 1; \
	fi

lint: install
	$(BIN)/ruff check .

test: install prom-tools lint
	SCANWATCH_REQUIRE_PROMETHEUS=1 $(BIN)/python -m pytest -q

demo: install
	@-$(MAKE) --no-print-directory prom-tools
	$(BIN)/scanwatch demo

bench-quick: install
	$(BIN)/python -m benchmarks --quick

bench: install
	$(BIN)/python -m benchmarks

# The scale curve (about 4k, 40k and 400k issues) and its chart; matplotlib comes with the `bench` extra.
bench-scale: install
	$(PYTHON) -m uv pip install -q -p $(VENV) -e '.[dev,bench]' -c constraints.txt
	$(BIN)/python -m benchmarks.scale

soak: install prom-tools
	SCANWATCH_SOAK=1 SCANWATCH_REQUIRE_PROMETHEUS=1 $(BIN)/python -m pytest -q -m slow

clean:
	rm -rf $(VENV) data .dagster_home .pytest_cache .ruff_cache
