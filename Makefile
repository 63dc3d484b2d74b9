# Two commands do everything on a fresh machine: `make demo` and `make test`.
# TORCH_REQ lets CI pin the CPU wheel (torch==2.13.0) without forcing it on users.
PYTHON    ?= python3
VENV      ?= .venv
TORCH_REQ ?= torch
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_REQ)"
	DS_BUILD_OPS=0 $(BIN)/pip install --quiet -e ".[test,frameworks]"
	# an editable install leaves gpulib uncompiled; byte-compile it once as a wheel install would
	$(BIN)/python -m compileall -q gpulib >/dev/null
	$(BIN)/python -m ipykernel install --prefix $(VENV) --name python3 >/dev/null
	touch $(STAMP)

# The bundled Xid 79 incident (examples/incident-gpu-fell-off-bus): its verdict is exit 2 (critical findings); only exit 3 (the run
# itself failed) fails `make demo`. The last lines printed say where the HTML report is.
DEMO_EVIDENCE ?= examples/incident-gpu-fell-off-bus
demo: $(STAMP)
	@$(BIN)/gpulib run incident --evidence $(DEMO_EVIDENCE); code=$$?; \
	if [ $$code -ge 3 ]; then exit $$code; fi; \
	echo "demo: exit $$code is the incident's verdict (0 healthy, 1 warnings, 2 critical); open the report above in a browser"

# Style and the layers of docs/ARCHITECTURE.md (import-linter contracts in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check gpulib tests benchmarks
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) archive out test-output
