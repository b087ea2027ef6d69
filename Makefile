# The two commands of the README: `make demo` and `make test`. Everything they need is installed here.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export UV_PYTHON_DOWNLOADS := never
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Byte-compile at install: the first `scanwatch sync` or code-server start does not pay for it.
export UV_COMPILE_BYTECODE := 1

.PHONY: install demo test lint test-tools prom-tools bench bench-quick bench-scale soak clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	@$(PYTHON) -m uv --version >/dev/null 2>&1 || $(PYTHON) -m pip install -q uv
	$(PYTHON) -m uv venv -q --allow-existing -p $(PYTHON) $(VENV)
	$(PYTHON) -m uv pip install -q -p $(VENV) -e '.[dev]' -c constraints.txt
	@touch $@

# What the end-to-end tests run for real, from Debian's packages: Prometheus, promtool, Alertmanager and amtool,
# the PostgreSQL 15 server (the history's second engine, Dagster's instance), openssl (the exporter's TLS), and
# for the deployment files: docker-compose (`config` needs no engine), tini (Docker's init) and systemd-analyze.
TEST_TOOLS := promtool prometheus prometheus-alertmanager amtool openssl docker-compose tini systemd-analyze
test-tools:
	@missing=""; for t in $(TEST_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || missing="$$missing postgresql"; \
	if [ -z "$$missing" ]; then \
	  echo "test tools: present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "test tools: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    prometheus prometheus-alertmanager postgresql openssl docker-compose tini systemd >/dev/null; \
	else \
	  echo "test tools missing:$$missing; run 'sudo apt-get install prometheus prometheus-alertmanager postgresql openssl docker-compose tini systemd' (Debian/Ubuntu)"; exit 1; \
	fi

# The demo needs Prometheus only; kept under its old name.
prom-tools: test-tools

# Style and the product's types (mypy strict, configured in pyproject.toml).
lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

test: install test-tools lint
	SCANWATCH_REQUIRE_PROMETHEUS=1 $(BIN)/python -m pytest -q -n 4 --dist loadfile --no-loadscope-reorder

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

soak: install test-tools
	SCANWATCH_SOAK=1 SCANWATCH_REQUIRE_PROMETHEUS=1 $(BIN)/python -m pytest -q -m slow -n 4 --dist loadfile

# The mutation habit (docs/reliability.md): each change of tests/mutations/mutations.yml applied to a copy of
# the tree, the tests it names run there; prints killed/survived and the score. Long (about half an hour on
# 2 cores): run before a release or after touching the merge SQL, the views, the rules or the templates, not
# in every CI run. MUTATE_ARGS narrows it, e.g. MUTATE_ARGS="--only rules-".
.PHONY: mutate
mutate: install test-tools
	$(BIN)/python -m tests.mutations -j 2 $(MUTATE_ARGS)

clean:
	rm -rf $(VENV) data .dagster_home .pytest_cache .ruff_cache .mypy_cache
