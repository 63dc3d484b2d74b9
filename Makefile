# Two commands do everything on a fresh machine: `make demo` and `make test`.
# `make demo` installs only what the demo imports (no torch, no test tools); `make test` adds
# torch and the test/framework extras on top. TORCH_REQ lets CI pin the CPU wheel
# (torch==2.13.0, which lies on its disk): a bare `torch` from PyPI pulls ~3 GB of CUDA wheels.
PYTHON     ?= python3
VENV       ?= .venv
TORCH_REQ  ?= torch
BIN        := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test lint bench clean

$(DEMO_STAMP): pyproject.toml
	@echo "make: creating $(VENV) and installing gpulib with what the demo imports (no torch)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --progress-bar on -e .
	# an editable install leaves gpulib uncompiled; byte-compile it once as a wheel install would
	$(BIN)/python -m compileall -q gpulib >/dev/null
	$(BIN)/python -m ipykernel install --prefix $(VENV) --name python3 >/dev/null
	touch $(DEMO_STAMP)

$(TEST_STAMP): $(DEMO_STAMP) pyproject.toml
	@echo "make: adding torch ($(TORCH_REQ)) and the test and framework extras for the test suite"
	$(BIN)/pip install --progress-bar on "$(TORCH_REQ)"
	DS_BUILD_OPS=0 $(BIN)/pip install --progress-bar on -e ".[test,frameworks]"
	touch $(TEST_STAMP)

# The bundled Xid 79 incident (examples/incident-gpu-fell-off-bus): its verdict is exit 3 (critical
# findings: no-go). Exit codes are gpulib's one table (README, `gpulib run --help`): a verdict (0, 1,
# 3, 4) is the demo working; 5 (the run itself failed), 2 (usage or input error) or anything else
# (gpulib not installed, Ctrl-C) fails `make demo`. The last lines say where the report is.
DEMO_EVIDENCE ?= examples/incident-gpu-fell-off-bus
demo: $(DEMO_STAMP)
	@$(BIN)/gpulib run incident --evidence $(DEMO_EVIDENCE); code=$$?; \
	case $$code in 0|1|3|4) ;; *) exit $$code;; esac; \
	echo "demo: exit $$code is the incident's verdict (0 healthy, 1 warnings, 3 no-go, 4 unknown); open the report above in a browser,"; \
	echo "demo: then walk the steps yourself: $(BIN)/gpulib lab   (JupyterLab on notebooks/00_triage.ipynb; --allow-root added as root)"

# Style and the layers of docs/ARCHITECTURE.md (import-linter contracts in pyproject.toml).
lint: $(TEST_STAMP)
	$(BIN)/ruff check gpulib tests benchmarks
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) archive out test-output
