# Plumb: `make demo` runs the aggregator with six simulated GPU nodes; `make test` runs every check.
# Both create .venv on first use and install what they need into it.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint unit integration proto bench images clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Plumb needs Python 3.11+; set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

demo: $(STAMP)
	$(BIN)/plumb demo

test: lint unit integration

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	scripts/lint-imports.sh
	$(BIN)/buf lint
	promtool check rules deploy/prometheus/rules.yml
	promtool test rules deploy/prometheus/tests/*.yml
	scripts/sync-chart-rules.sh --check

# Helm is fetched into a cache outside the repository; tests find it through PLUMB_HELM.
HELM = $(shell scripts/install-helm.sh 2>/dev/null)

unit: $(STAMP)
	PLUMB_HELM=$(HELM) $(BIN)/pytest tests/unit

integration: $(STAMP)
	PLUMB_HELM=$(HELM) $(BIN)/pytest tests/integration --durations=10

proto: $(STAMP)
	scripts/gen-proto.sh

# The agent and aggregator images (Dockerfile targets), labelled with this version and commit.
VERSION  = $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
REVISION = $(shell git rev-parse HEAD 2>/dev/null)
IMAGE   ?= ghcr.io/plumb-dev/plumb

images:
	for target in agent aggregator; do \
	  docker build --target $$target --build-arg VERSION=$(VERSION) \
	    --build-arg REVISION=$(REVISION) -t $(IMAGE)-$$target:$(VERSION) . || exit 1; \
	done

bench: $(STAMP)
	$(BIN)/python bench/fact_to_metric.py
	$(BIN)/python bench/recipes_bench.py
	$(BIN)/python bench/bundle_bench.py
	$(BIN)/python bench/validation_bench.py
	$(BIN)/python bench/agent_footprint.py
	$(BIN)/python bench/fleet.py --agents 1000

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
