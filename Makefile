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
	$(BIN)/pip install --quiet -e ".[test]"
	$(BIN)/python -m ipykernel install --prefix $(VENV) --name python3 >/dev/null
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gpulib demo

test: $(STAMP)
	$(BIN)/ruff check gpulib tests benchmarks
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) archive out test-output
