# gpulease: `make run` and `make test` are the quick start (see README.md).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Tests talk to the real PostgreSQL and Redis; override for another server.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15
# make test's parallel streams: one per core; stream k uses Redis database 15 - k.
TEST_STREAMS ?= $(shell nproc 2>/dev/null || echo 2)
# The browser tests (tests/browser) drive Debian's chromium through Playwright; Playwright's
# own browser download is never used.
CHROMIUM ?= /usr/bin/chromium
# make run's embedded SQLite must behave as PostgreSQL does where dates, hostile input and
# the demo's evidence are concerned: these tests run a second time on SQLite.
SQLITE_TESTS := tests/test_clock_matrix.py tests/api/test_hostile_input.py \
	tests/portal/test_hostile_input.py tests/leases/test_demo_evidence.py

.PHONY: run setup test lint format typecheck bench messages clean browser assets lock

# Every third-party package at the version and hashes requirements-dev.lock pins (pip
# refuses anything else), then our two packages themselves, without dependencies and built
# with the locked setuptools.
$(STAMP): requirements-dev.lock pyproject.toml verifier/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r requirements-dev.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e ./verifier -e .
	touch $(STAMP)

setup: $(STAMP) messages assets

# The lock files, from pyproject.toml and verifier/pyproject.toml, for this machine's Python
# (3.11, as the image's): requirements.lock what production runs (and Babel for the image's
# translations), requirements-dev.lock that plus the dev tools, at the same versions. Only
# PyPI is asked (this machine's pip configuration, a mirror or local wheels, is left out), so
# both install on a fresh machine; gpulease-verify is ./verifier, never from an index. Pins
# already in the files are kept; `make lock LOCK_ARGS=--upgrade` moves everything forward.
LOCK := env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null \
	CUSTOM_COMPILE_COMMAND="make lock" $(PY) -m piptools compile --quiet \
	--index-url https://pypi.org/simple --no-emit-index-url --find-links build/verifier-wheel \
	--no-emit-find-links --generate-hashes --strip-extras --all-build-deps \
	--unsafe-package gpulease-verify $(LOCK_ARGS)

lock: $(STAMP)
	rm -rf build/verifier-wheel
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir build/verifier-wheel ./verifier
	$(LOCK) --extra messages -o requirements.lock pyproject.toml verifier/pyproject.toml
	$(LOCK) --extra messages --extra dev -c requirements.lock -o requirements-dev.lock \
		pyproject.toml verifier/pyproject.toml

# The portal's CSS framework (Pico CSS) and, for the browser tests, axe-core come from the npm
# registry at the versions package-lock.json pins; WhiteNoise serves the copies under
# portal/static/portal/vendor/ (never a CDN).
VENDOR := portal/static/portal/vendor
NODE_STAMP := node_modules/.installed

$(NODE_STAMP): package.json package-lock.json
	@command -v npm >/dev/null || { echo "make assets needs npm (Debian: apt-get install npm)"; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

$(VENDOR)/pico.min.css: $(NODE_STAMP)
	mkdir -p $(VENDOR)
	cp node_modules/@picocss/pico/css/pico.min.css $(VENDOR)/pico.min.css

# The lease page's interactive charts: a custom Apache ECharts build holding only what
# portal/assets/charts.js imports (line charts, grid, tooltip, legend, data zoom, canvas),
# so the page's JavaScript and CSS stay under 300 KB gzipped.
$(VENDOR)/charts.min.js: $(NODE_STAMP) portal/assets/charts.js
	mkdir -p $(VENDOR)
	node_modules/.bin/esbuild portal/assets/charts.js --bundle --minify --format=iife \
		--target=es2019 --legal-comments=eof --log-level=warning --outfile=$@

assets: $(VENDOR)/pico.min.css $(VENDOR)/charts.min.js

messages: $(STAMP)
	$(VENV)/bin/pybabel -q compile --domain=django --directory=locale

run: setup
	$(PY) manage.py migrate --no-input -v0
	$(PY) manage.py demo
	@echo
	@echo "gpulease is starting: admin portal at http://127.0.0.1:$${WEB_PORT:-8000}/admin/"
	@echo "(SQLite and the filesystem broker under var/; Ctrl-C stops web, worker and beat)"
	@echo
	$(VENV)/bin/honcho start

# Debian's chromium, plus CJK fonts so Chinese pages render in screenshots; installed when
# missing and we are root, otherwise the browser tests skip (and fail with CI=true).
browser:
	@pkgs=""; \
	[ -x "$(CHROMIUM)" ] || pkgs="chromium"; \
	dpkg-query -W -f='$${Status}' fonts-noto-cjk 2>/dev/null | grep -q 'ok installed' \
		|| pkgs="$$pkgs fonts-noto-cjk"; \
	if [ -n "$$pkgs" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing for the browser tests:$$pkgs"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				--no-install-recommends $$pkgs >/dev/null; \
		else \
			echo "browser tests need:$$pkgs (sudo apt-get install$$pkgs); they skip, or fail with CI=true"; \
		fi; \
	fi

# Without PYTEST_ARGS: the whole suite in one stream per core (scripts/test_shards.py, each
# stream on its own PostgreSQL and Redis databases), the SQLite files once more on SQLite,
# then the serial files alone. With PYTEST_ARGS: one plain pytest run on PostgreSQL.
test: setup browser
	@if [ -z "$(PYTEST_ARGS)" ]; then \
		DATABASE_URL=$(TEST_DATABASE_URL) TEST_REDIS_URL=$(TEST_REDIS_URL) \
			$(PY) scripts/test_shards.py --streams $(TEST_STREAMS) --sqlite $(SQLITE_TESTS); \
	else \
		DATABASE_URL=$(TEST_DATABASE_URL) TEST_REDIS_URL=$(TEST_REDIS_URL) \
			$(PY) -m pytest $(PYTEST_ARGS); \
	fi

# The documentation site (mkdocs.yml, docs/) builds with no warning: a page missing from the
# nav or a link to a page or anchor that does not exist fails. It builds into site/ (ignored).
# lint-imports: the import contracts between the apps ([tool.importlinter] in pyproject.toml,
# docs/architecture-layers.md).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) scripts/size_limits.py
	$(PY) scripts/cross_app_reads.py --max 0
	$(PY) -m mkdocs build --strict --site-dir site

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck: $(STAMP)
	$(VENV)/bin/mypy common ledger leases billing benchmarks config monitoring telemetry demo \
		verifier/gpulease_verify

bench: setup
	$(PY) -m perf

clean:
	rm -rf $(VENV) var site .pytest_cache .mypy_cache .ruff_cache node_modules $(VENDOR)
