# Everything a fresh machine needs: Python 3.12 (via pyenv and .python-version), Node and npm.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
TS_CLIENT := tests/clients/ts
BROWSER_TESTS := tests/browser
NODE_PEERS := tests/truth/peers/node
# Debian's chromium (playwright-core drives it; Playwright's own browser downloads are not used).
CHROMIUM ?= chromium

.PHONY: report test lint chromium browser-deps nginx truth-deps bench-addon bench-recorder-parts bench-analyzer bench-peer-lookup bench-reader bench-report bench-scale bench-stdio samples truth clean

# The main job: the bundled sample captures rendered into one self-contained report. It needs the package
# alone (mitmproxy, pandas, jinja2, jsonschema), not the test extra.
report: $(RUN_STAMP)
	@mkdir -p out
	$(BIN)/mcp-blackbox report sample_captures/*.flows sample_captures/*.stdio.jsonl -o out/report.html
	@echo "open out/report.html in a browser (it works offline, from file://)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# setup.py compiles the flow-record decoder in place (mypyc): installed again when it or the decoder changes.
$(RUN_STAMP): pyproject.toml setup.py analyzer/wire/tnetstring_decoder.py | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(STAMP): pyproject.toml setup.py analyzer/wire/tnetstring_decoder.py | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@ $(RUN_STAMP)

$(TS_CLIENT)/node_modules/.package-lock.json: $(TS_CLIENT)/package-lock.json
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error

$(BROWSER_TESTS)/node_modules/.package-lock.json: $(BROWSER_TESTS)/package-lock.json
	cd $(BROWSER_TESTS) && npm ci --no-audit --no-fund --loglevel=error

$(NODE_PEERS)/node_modules/.package-lock.json: $(NODE_PEERS)/package-lock.json
	cd $(NODE_PEERS) && npm ci --no-audit --no-fund --loglevel=error

# Debian's nginx: the real gateway of the truth corpus (tests/truth/family_gateway.py).
nginx:
	@command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx-light)

# What the truth corpus runs: the TS SDK (OAuth client), mcp-remote and nginx.
truth-deps: $(STAMP) $(TS_CLIENT)/node_modules/.package-lock.json $(NODE_PEERS)/node_modules/.package-lock.json nginx

# Headless Chromium for the HTML report tests; CI runs as root, so apt-get works as is.
chromium:
	@command -v $(CHROMIUM) >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium)

browser-deps: chromium $(BROWSER_TESTS)/node_modules/.package-lock.json

# Tests run in parallel workers, one per CPU (pytest-xdist); PYTEST_WORKERS=0 runs them in this process.
PYTEST_WORKERS ?= auto

# The truth corpus is recorded first, alone: its scenarios measure which process sent each call, and the
# recorder's lookup misses short connections when the machine is saturated (browsers, servers and proxies
# of the parallel tests), which turns measured identity into inference and the score into a coin toss.
TRUTH_CORPUS_TEST := tests/truth/test_truth.py::test_the_corpus_scores_at_least_095

test: $(STAMP) $(TS_CLIENT)/node_modules/.package-lock.json browser-deps truth-deps lint
	$(BIN)/pytest $(TRUTH_CORPUS_TEST)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal --deselect $(TRUTH_CORPUS_TEST)

# The quick loop: unit, analyzer and fuzz tests and the checks of the sample and synthetic captures.
# No test server, proxy, SDK client or browser is started (only the analyzer CLI, briefly).
.PHONY: test-fast
test-fast: $(STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal tests/unit tests/analyzer tests/fuzz tests/test_sample_captures.py tests/test_synthetic_capture.py \
		-m "not e2e and not load" --deselect tests/fuzz/test_fuzz_escaping.py::test_captured_text_in_chromium

# mypy and import-linter cannot follow the editable install's package-dir mapping: they read mcp_blackbox
# through the committed links in typecheck/ (pyproject.toml's mypy_path; PYTHONPATH for lint-imports).
# ESLint for the report's script runs from the repository's root (its config's paths are relative to it);
# --max-warnings 0 turns a file the config does not reach into a failure instead of a warning.
lint: $(STAMP) $(BROWSER_TESTS)/node_modules/.package-lock.json
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=typecheck $(BIN)/lint-imports --no-cache
	$(BIN)/mypy -p mcp_blackbox.addon -p mcp_blackbox.analyzer -p mcp_blackbox.cli -p tests.support -p tests.truth
	$(BROWSER_TESTS)/node_modules/.bin/eslint --config $(BROWSER_TESTS)/eslint.config.mjs --max-warnings 0 templates/report.js

bench-addon: $(STAMP)
	$(BIN)/python tests/benchmarks/bench_addon.py

# Where the recorder's time goes: its like-for-like ratio split by switching parts of it off.
bench-recorder-parts: $(STAMP)
	$(BIN)/python tests/benchmarks/bench_recorder_parts.py

bench-analyzer: $(STAMP)
	$(BIN)/python tests/benchmarks/bench_analyzer.py

# How fast the recorder's helper names the process behind a client socket, against psutil's scan.
bench-peer-lookup: $(STAMP)
	$(BIN)/python tests/benchmarks/bench_peer_lookup.py

bench-report: $(STAMP) browser-deps
	$(BIN)/python tests/benchmarks/bench_report.py

# A day of traffic: 1,000,000 calls in rotated files (generated once, cached); BENCH_SCALE_ARGS="--calls 200000" for a quick look.
# The flow-file reader as it is against the same compiled by mypyc, per record (weighing a compiled reader).
bench-reader: $(STAMP)
	$(BIN)/python tests/benchmarks/bench_reader.py

bench-scale: $(STAMP) browser-deps
	$(BIN)/python tests/benchmarks/bench_scale.py $(BENCH_SCALE_ARGS)

# record --stdio's cost per message: round trips to a stdio server, bare and wrapped, in one run;
# BENCH_STDIO_ARGS="--server sdk" for the Python SDK's server instead of a minimal one.
bench-stdio: $(STAMP)
	$(BIN)/python tests/benchmarks/bench_stdio.py $(BENCH_STDIO_ARGS)

samples: $(STAMP) $(TS_CLIENT)/node_modules/.package-lock.json
	$(BIN)/python sample_captures/record_samples.py
	$(BIN)/python sample_captures/record_stdio_sample.py

# The labelled truth corpus (tests/truth/): scenarios recorded through real processes, then the analyzer scored on them.
truth: truth-deps
	@dir=$$(mktemp -d /tmp/mcp-blackbox-truth.XXXXXX) && echo "corpus: $$dir" && \
		$(BIN)/python tests/truth/record_corpus.py --out $$dir && $(BIN)/python tests/truth/score.py $$dir

clean:
	rm -rf $(VENV) $(TS_CLIENT)/node_modules $(BROWSER_TESTS)/node_modules $(NODE_PEERS)/node_modules .pytest_cache
