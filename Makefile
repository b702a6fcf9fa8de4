# The README's two commands: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
OUTPUT ?= output
EPSILON ?= 4

.PHONY: run test test-slow test-long test-connect test-cluster test-delta dist lint check-java clean

check-java:
	@command -v java >/dev/null 2>&1 || { echo "error: Java 17+ is required (java not found on PATH); install OpenJDK 17, e.g. apt-get install openjdk-17-jre-headless"; exit 1; }

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# DP release, synthetic data and evaluation of the embedded UCI Adult data (train split), epsilon 4.
# --overwrite: a second `make run` replaces output/ (without it an existing output is an error).
run: check-java $(STAMP)
	$(BIN)/spark-dpsynth pipeline --config conf/adult.toml --input data/adult.csv.gz --output $(OUTPUT) --epsilon $(EPSILON) --overwrite

# The default suite (fast tests); slow statistical and privacy tests: `make test-slow`; the long end-to-end runs
# on whole real tables, the standalone cluster and the Connect notebook: `make test-long` (not in CI, whose
# `make test` and `make test-slow` must stay under an hour together on 2 cores).
test: check-java $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not long" -q --durations=15

test-slow: check-java $(STAMP)
	$(BIN)/python -m pytest -m "slow and not long" -q --durations=15

test-long: check-java $(STAMP)
	$(BIN)/python -m pytest -m long -q --durations=15

# Subsets of the suites (their long tests included): Spark Connect end to end (local Connect server), spark-submit on a standalone
# master + two workers on 127.0.0.1, Delta Lake round trips (skipped where the Delta jars cannot be loaded).
test-connect: check-java $(STAMP)
	$(BIN)/python -m pytest -m connect -q

test-cluster: check-java $(STAMP)
	$(BIN)/python -m pytest -m cluster -q

test-delta: check-java $(STAMP)
	$(BIN)/python -m pytest -m delta -q -rs

# dist/: the wheel (pip install on a cluster, a Databricks library) and spark_dpsynth.zip (spark-submit --py-files).
dist: $(STAMP)
	rm -rf dist && $(BIN)/python -m pip wheel --quiet --no-deps -w dist .
	$(BIN)/python -c "import zipfile, pathlib; z = zipfile.ZipFile('dist/spark_dpsynth.zip', 'w'); [z.write(p) for p in sorted(pathlib.Path('spark_dpsynth').rglob('*.py'))]; z.write('spark_dpsynth/py.typed'); z.close()"

lint: $(STAMP)
	$(BIN)/ruff check spark_dpsynth tests jobs examples
	$(BIN)/ruff format --check spark_dpsynth tests jobs examples

clean:
	rm -rf $(OUTPUT) .pytest_cache

# Synthetic-data quality on the user's path (issues 4, 16, 29): our modes (auto, model, sds, mst) are
# `spark-dpsynth pipeline` runs (the CLI's reading and type inference, test-mode seed), beside MST and AIM of
# private-pgm (peer_mst, peer_aim, run by smartnoise-synth from their own environment .venv-peers,
# `make bench-peers-env`), on Adult coded as integers and as it comes, Adult with its config, LFS with
# benchmarks/lfs.toml and SF fire (32 integer-coded columns), each scored by an outside pandas yardstick
# (benchmarks/yardstick.py): prints a markdown table, writes $(OUTPUT)/bench-quality/quality.json. Hours on 2
# cores (peer AIM alone: up to its time limit per run); QUALITY_ARGS runs pieces, e.g.
# QUALITY_ARGS="--datasets adult_codes --epsilons 4,1 --modes auto --skip-peers" (see benchmarks/README.md).
QUALITY_ARGS ?=
PEERS_VENV  := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed

# torch==2.13.0 first: smartnoise-synth needs opacus, hence torch; that pin takes the CPU build (a plain `torch`
# would download a multi-GB CUDA build).
$(PEERS_STAMP):
	@test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet 'torch==2.13.0'
	$(PEERS_VENV)/bin/python -m pip install --quiet 'torch==2.13.0' 'smartnoise-synth==1.0.8' pandas pyarrow
	@touch $(PEERS_STAMP)

.PHONY: bench-quality bench-peers-env
bench-peers-env: $(PEERS_STAMP)

bench-quality: check-java $(STAMP) $(PEERS_STAMP)
	$(BIN)/python benchmarks/quality.py --output $(OUTPUT)/bench-quality $(QUALITY_ARGS)

# Scale and speed against pac-synth (issue 6): NIST TX 2019 (9k and 27k rows), Adult replicated to 1M rows,
# military (1.4M rows); local[1] vs local[2]; a spark-submit run on a standalone master + 2 workers. Prints a
# markdown table, writes $(OUTPUT)/bench/scale.json. 6-10 minutes on 2 cores. pac-synth runs from its own
# environment (.venv-bench, `make bench-env`), never from the project's. BENCH_ARGS="--quick --skip-cluster"
# (or --datasets, --skip-pacsynth, --skip-scaling) runs pieces.
BENCH_VENV  := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed
BENCH_ARGS ?=

$(BENCH_STAMP):
	@test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet 'pac-synth==0.0.8' pandas pyarrow
	@touch $(BENCH_STAMP)

.PHONY: bench bench-env
bench-env: $(BENCH_STAMP)

bench: check-java $(STAMP) $(BENCH_STAMP)
	$(BIN)/python benchmarks/scale.py --output $(OUTPUT)/bench/scale.json --cache $(OUTPUT)/bench/cache $(BENCH_ARGS)

# NIST's own k-marginal yardstick: SDNist 2.4 (the NIST CRC Data and Metrics Archive's deidentified-data report
# tool) in its own environment .venv-sdnist, never a dependency of the package. benchmarks/sdnist_report.py lays
# out SDNist's data_root from ../shared/data and runs `python -m sdnist.report` on a synthetic CSV (offline).
SDNIST_VENV  := .venv-sdnist
SDNIST_STAMP := $(SDNIST_VENV)/.installed

$(SDNIST_STAMP):
	@test -x $(SDNIST_VENV)/bin/python || $(PYTHON) -m venv $(SDNIST_VENV)
	$(SDNIST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SDNIST_VENV)/bin/python -m pip install --quiet 'sdnist==2.4'
	@touch $(SDNIST_STAMP)

.PHONY: bench-sdnist-env
bench-sdnist-env: $(SDNIST_STAMP)
