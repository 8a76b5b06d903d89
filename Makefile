# Everything a fresh machine needs: Python 3.12 (via pyenv and .python-version), Node and npm.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TS_CLIENT := tests/clients/ts
BROWSER_TESTS := tests/browser
# Debian's chromium (playwright-core drives it; Playwright's own browser downloads are not used).
CHROMIUM ?= chromium

.PHONY: report test lint chromium browser-deps bench-addon bench-analyzer bench-report samples clean

# The main job: the bundled sample captures rendered into one self-contained report.
report: $(STAMP)
	@mkdir -p out
	$(BIN)/mcp-blackbox report sample_captures/*.flows -o out/report.html
	@echo "open out/report.html in a browser (it works offline, from file://)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

$(TS_CLIENT)/node_modules/.package-lock.json: $(TS_CLIENT)/package-lock.json
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error

$(BROWSER_TESTS)/node_modules/.package-lock.json: $(BROWSER_TESTS)/package-lock.json
	cd $(BROWSER_TESTS) && npm ci --no-audit --no-fund --loglevel=error

# Headless Chromium for the HTML report tests; CI runs as root, so apt-get works as is.
chromium:
	@command -v $(CHROMIUM) >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium)

browser-deps: chromium $(BROWSER_TESTS)/node_modules/.package-lock.json

test: $(STAMP) $(TS_CLIENT)/node_modules/.package-lock.json browser-deps
	$(BIN)/ruff check .
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .

bench-addon: $(STAMP)
	$(BIN)/python tests/benchmarks/bench_addon.py

bench-analyzer: $(STAMP)
	$(BIN)/python tests/benchmarks/bench_analyzer.py

bench-report: $(STAMP) browser-deps
	$(BIN)/python tests/benchmarks/bench_report.py

samples: $(STAMP) $(TS_CLIENT)/node_modules/.package-lock.json
	$(BIN)/python sample_captures/record_samples.py

clean:
	rm -rf $(VENV) $(TS_CLIENT)/node_modules $(BROWSER_TESTS)/node_modules .pytest_cache
