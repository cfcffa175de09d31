# streameval: every command a user or CI needs. `make help` lists them.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
PYTHON ?= python3
# the real datasets: $STREAMEVAL_DATA_DIR, else ../shared/datasets beside the clone if it exists
export STREAMEVAL_DATA_DIR ?= $(abspath $(wildcard ../shared/datasets))

.PHONY: help install test slow lint run evaluate bench java faults clean kafka-up kafka-down kafka-experiment report readme-check

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

install: $(VENV)/.installed  ## create .venv and install streameval with its test tools

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

test: install  ## the test suite (unit, real-data prefixes, Kafka on the embedded broker; ~8 min) but the slow checks and the fault injections
	$(PY) -m pytest -q -m "not faults and not moa and not slow"
	# MOA's tests in a process of their own: the JVM they start stays in its process until exit
	$(PY) -m pytest -q -p no:cacheprovider -m "moa and not faults"

slow: install  ## the slow checks (whole real datasets, long Kafka scenarios, the dashboard in Chromium; ~11 min)
	$(PY) -m pytest -q -p no:cacheprovider -m "slow and not faults and not moa"

README_SLOW ?= 1
readme-check: install  ## every README command as written, the slow ones too (make run, whole-Electricity tour, the broker session; ~20 min)
	STREAMEVAL_README_SLOW=$(README_SLOW) $(PY) -m pytest -q -p no:cacheprovider -rs tests/test_readme_commands.py tests/test_readme_broker.py

lint: install  ## ruff over the code
	$(BIN)/ruff check streameval pipeline agents schemas tests docker
	$(BIN)/ruff format --check streameval pipeline agents schemas tests docker

run: install  ## the main job: replay Electricity through Kafka (embedded broker unless KAFKA_BOOTSTRAP_SERVERS is set)
	$(BIN)/streameval run --dataset electricity --delay natural --learner nochange --learner majority \
		--learner nb --learner ht --learner ta:ht --window 1000 --reeval-k 10 --bins 20 --json results/electricity-run.json

evaluate: install  ## the same experiment in-process, no Kafka
	$(BIN)/streameval evaluate --dataset electricity --delay natural --learner nochange --learner majority \
		--learner nb --learner ht --learner ta:ht --window 1000 --reeval-k 10 --bins 20 --json results/electricity-evaluate.json

faults: install  ## the fault injections (killed workers, lost broker) and the 10-minute soak (STREAMEVAL_SOAK=1)
	STREAMEVAL_SOAK=1 $(PY) -m pytest -q -p no:cacheprovider -m "faults and not moa" -s
	$(PY) -m pytest -q -p no:cacheprovider -m "faults and moa" -s

bench: install  ## speed and memory, measured side by side (writes bench/results.json)
	$(BIN)/streameval bench

java: install  ## rebuild the Java 8 class of MOA's loops over a block of rows from its source (needs a JDK's javac)
	cd pipeline/learners/java && javac --release 8 -Xlint:-options -d . \
		-cp "$$($(abspath $(PY)) -m streameval.pipeline.learners.moa_java --jar)" streameval/moa/Loops.java

# Compose v2 (`docker compose`), else the v1 binary (`docker-compose`)
COMPOSE_CMD ?= $(shell docker compose version >/dev/null 2>&1 && echo 'docker compose' || echo docker-compose)
COMPOSE := $(COMPOSE_CMD) -p streameval -f docker/docker-compose.yml

.PHONY: kafka-up kafka-down kafka-experiment report

kafka-up:  ## start Apache Kafka (KRaft, one node), create the topics, start a worker (Docker)
	$(COMPOSE) up -d

kafka-experiment:  ## on the Docker Kafka: submit + replay Electricity; writes results/electricity.json and its report
	mkdir -p results
	$(COMPOSE) --profile experiment up -d submit replay
	RESULTS_UID=$$(id -u) $(COMPOSE) --profile experiment run --rm --no-deps results

kafka-down:  ## stop and remove every compose service, the experiment jobs included (Kafka's data goes too)
	$(COMPOSE) --profile experiment down --remove-orphans

report: install  ## HTML report of `make evaluate`'s results (results/electricity-evaluate-report/report.html)
	$(BIN)/streameval report results/electricity-evaluate.json

clean:  ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info build
