# The README's two commands: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
OUTPUT ?= output
EPSILON ?= 4

.PHONY: run test test-slow lint check-java clean

check-java:
	@command -v java >/dev/null 2>&1 || { echo "error: Java 17+ is required (java not found on PATH); install OpenJDK 17, e.g. apt-get install openjdk-17-jre-headless"; exit 1; }

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# DP release, synthetic data and evaluation of the embedded UCI Adult data (train split), epsilon 4.
run: check-java $(STAMP)
	$(BIN)/spark-dpsynth pipeline --config conf/adult.toml --input data/adult.csv.gz --output $(OUTPUT) --epsilon $(EPSILON)

# The default suite (fast tests, under a few minutes); slow statistical/end-to-end tests: `make test-slow`.
test: check-java $(STAMP)
	$(BIN)/python -m pytest -m "not slow" -q

test-slow: check-java $(STAMP)
	$(BIN)/python -m pytest -m slow -q

lint: $(STAMP)
	$(BIN)/ruff check spark_dpsynth tests jobs
	$(BIN)/ruff format --check spark_dpsynth tests jobs

clean:
	rm -rf $(OUTPUT) .pytest_cache
