# The two commands of the README:
#   make demo   build a store from the demo corpus and search it, with and without reranking
#   make test   install what the tests need (nox, uv) and run every test session
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench goldens clean

$(BIN)/nox:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q nox uv

# The demo shows the local rerankers next to the coarse order, so it installs them too (the
# learned reranker with its LoCoMo model: numpy only, no scikit-learn).
DEMO_PLUGINS := plugins/rankseam-mmr plugins/rankseam-decision plugins/rankseam-listwise \
	plugins/rankseam-learned plugins/rankseam-learned-locomo

$(BIN)/rankseam: $(BIN)/nox core/pyproject.toml
	$(BIN)/python -m uv pip install -q --python $(BIN)/python -e core $(addprefix -e ,$(DEMO_PLUGINS))
	@touch $@

demo: $(BIN)/rankseam
	$(BIN)/rankseam demo

test: $(BIN)/nox
	$(BIN)/python .ci/parallel_nox.py

lint: $(BIN)/nox
	$(BIN)/nox -s lint

bench: $(BIN)/nox
	$(BIN)/nox -s bench

# Rewrite the golden files of tests/test_goldens.py after an intended output change, printing
# each file's diff; review them, then commit tests/goldens/.
goldens: $(BIN)/nox
	RANKSEAM_UPDATE_GOLDENS=1 $(BIN)/nox -s integration -- -k test_goldens -s
	git --no-pager diff --stat -- tests/goldens

clean:
	rm -rf $(VENV) .nox
