# The two commands of the README:  make demo  (set up, ingest sample data through Airflow, show it)
#                                   make test  (set up, run every test)
# Everything lives inside this folder: the venv, Airflow's home and SQLite DB, Spark scratch, the lake.

SHELL := /bin/bash
PROJECT := $(CURDIR)
VENV := $(PROJECT)/.venv
PYTHON ?= python3

# One block of environment for every command (Airflow, spark-submit, the CLI, the tests). `?=`: a value the
# environment already has wins (a cluster's spark_default, another Airflow home).
export PATH := $(VENV)/bin:$(PATH)
export PYTHONPATH := $(PROJECT)
AIRFLOW_HOME ?= $(PROJECT)/.airflow
export AIRFLOW_HOME
export AIRFLOW__CORE__DAGS_FOLDER := $(PROJECT)/dags
export AIRFLOW__CORE__PLUGINS_FOLDER := $(PROJECT)/plugins
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__PARALLELISM := 4
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION := True
export AIRFLOW__LOGGING__LOGGING_LEVEL := WARNING
# Who is who: the FAB auth manager (users and roles in the metadata DB, docs/identity.md); AIRFLOW_AUTH=simple keeps
# Airflow's simple auth manager on a laptop (users in one variable, no roles of this product's).
AIRFLOW_AUTH ?= fab
ifeq ($(AIRFLOW_AUTH),simple)
export AIRFLOW__CORE__AUTH_MANAGER := airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager
else
export AIRFLOW__CORE__AUTH_MANAGER := airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager
endif
AIRFLOW_CONN_SPARK_DEFAULT ?= {"conn_type": "spark", "host": "local[2]"}
export AIRFLOW_CONN_SPARK_DEFAULT
export PYSPARK_PYTHON := $(VENV)/bin/python
export PYSPARK_DRIVER_PYTHON := $(VENV)/bin/python
export SPARK_LOCAL_DIRS := $(PROJECT)/.spark/local
export SPARK_LOCAL_IP := 127.0.0.1
export LAKE_ROOT ?= $(PROJECT)/lake
export CLOUDTRAIL_ETL_INPUT ?= $(PROJECT)/landing/cloudtrail
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Python caches the project's compiled modules (__pycache__/, git-ignored): an environment that sets
# PYTHONDONTWRITEBYTECODE (container images often do) would have every process (a driver, each Python worker,
# each Airflow task) compile them again.
unexport PYTHONDONTWRITEBYTECODE

STAMP := $(VENV)/.installed-$(shell cat requirements.txt | cksum | cut -d' ' -f1)

.PHONY: setup install jars demo demo-s3 test test-fast sample-data clean help env airflow stop

help:
	@echo "make demo   set up, ingest generated CloudTrail samples through Airflow, show the table"
	@echo "make demo-s3  the same with the logs and the lake in buckets of a local S3 server (moto)"
	@echo "make test   set up and run the tests"
	@echo "make test-fast  the fast tier: the tests that start no JVM and no Airflow, chosen by folder (under a minute)"
	@echo "make airflow  start Airflow on 127.0.0.1:\$$AIRFLOW_PORT (default 8080) and print the UI's URL and login"
	@echo "make stop   stop that Airflow and every Spark driver it started"
	@echo "make env    print the environment as shell exports: eval \"\$$(make -s env)\""
	@echo "make clean  remove the lake, landing data, Airflow home, Spark scratch, a hand-started worker's work/ (keeps the venv)"

$(STAMP): requirements.txt
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@echo "installing the stack into $(VENV) (about 3 minutes the first time)"
	@$(VENV)/bin/pip install --quiet -r requirements.txt 2>&1 | grep -v "^WARNING: Location" || true
	@$(VENV)/bin/python -c "import pyspark, airflow, airflow.providers.apache.spark" \
		|| { echo "error: the install did not complete; see pip's output above"; exit 1; }
	@rm -f $(VENV)/.installed-* && touch $@

# The pinned JVM jars (Delta Lake, Spark's Kafka connector, S3A and the AWS SDK modules) from Maven Central, and
# Delta's S3 log store built with javac into .jars/, sha256-checked (spark_jobs/launch/jars.py).
JARS_STAMP := $(PROJECT)/.jars/.ok-$(shell cat spark_jobs/launch/jars.py spark_jobs/launch/java/*.java | cksum | cut -d' ' -f1)
$(JARS_STAMP): $(STAMP) spark_jobs/launch/jars.py spark_jobs/launch/java/S3ConditionalLogStore.java
	@python -m spark_jobs.launch.jars fetch
	@rm -f $(PROJECT)/.jars/.ok-* && touch $@

# The driver JVM's class archive (spark_jobs/launch/class_archive.py, trained by tools/class_archive_training.py):
# every Spark start maps it and starts faster. Made after the jars and the venv it is made from; a failure only
# warns (Spark starts are then slower).
ARCHIVE_STAMP := $(PROJECT)/.jars/.jsa-$(shell cat spark_jobs/launch/class_archive.py tools/class_archive_training.py spark_jobs/launch/jars.py requirements.txt | cksum | cut -d' ' -f1)
$(ARCHIVE_STAMP): $(JARS_STAMP)
	@echo "making the Spark driver's class archive (about 1.5 minutes the first time)"
	@python -m spark_jobs.launch.class_archive build
	@rm -f $(PROJECT)/.jars/.jsa-* && touch $@

$(AIRFLOW_HOME)/airflow.db: $(STAMP)
	@mkdir -p $(AIRFLOW_HOME) $(SPARK_LOCAL_DIRS)
	@airflow db migrate > $(AIRFLOW_HOME)/db-migrate.log 2>&1 \
		|| { tail -20 $(AIRFLOW_HOME)/db-migrate.log; exit 1; }

# The two steps the project's image runs too (Dockerfile: `make install`, `make jars`: the jars and the
# class archive); the image's
# Airflow DB is Postgres, migrated by docker-compose's airflow-init instead of the SQLite one here.
install: $(STAMP)
jars: $(JARS_STAMP) $(ARCHIVE_STAMP)

setup: install jars $(AIRFLOW_HOME)/airflow.db

sample-data: setup
	@test -d $(CLOUDTRAIL_ETL_INPUT) || python -m spark_jobs sample-data --out $(CLOUDTRAIL_ETL_INPUT)

demo: sample-data
	@echo "== running DAG cloudtrail_etl_catchup through Airflow (airflow dags test) =="
	@airflow dags test cloudtrail_etl_catchup > $(AIRFLOW_HOME)/demo-dag-run.log 2>&1 \
		|| { tail -40 $(AIRFLOW_HOME)/demo-dag-run.log; exit 1; }
	@airflow dags list-runs cloudtrail_etl_catchup -o plain 2>/dev/null | grep -E "^dag_id|^cloudtrail_etl_catchup" | head -2 | cut -c1-100
	@python -c "from spark_jobs.launch.submit import SparkConnection; print('ran on Spark master', SparkConnection.from_airflow_env().master, '(the connection spark_default)')"
	@echo "== cloudtrail_events: rows per date (Spark) =="
	@python -m spark_jobs sql "SELECT date, count(*) AS events, count(DISTINCT eventID) AS distinct_ids FROM cloudtrail_events GROUP BY date ORDER BY date" 2>/dev/null
	@echo "== example query: errors per eventSource (DuckDB on delta-rs, no JVM) =="
	@python -m spark_jobs sql --engine duckdb "SELECT eventSource, errorCode, count(*) AS n FROM cloudtrail_events WHERE errorCode IS NOT NULL GROUP BY 1, 2 ORDER BY n DESC LIMIT 10" 2>/dev/null
	@echo "== cloudtrail_quarantine: what could not be ingested, and why (DuckDB) =="
	@python -m spark_jobs sql --engine duckdb "SELECT reason, record_index, regexp_extract(source_file, '[^/]+$$', 0) AS file, left(detail, 60) AS detail FROM cloudtrail_quarantine ORDER BY file, record_index" 2>/dev/null

# The demo against a local S3-compatible server: logs in one bucket, the lake in another (tools/demo_s3.py).
demo-s3: setup
	@python -m tools.demo_s3

# Two workers (pytest-xdist), a test module's tests on one worker (its module fixtures built once);
# TEST_WORKERS=0 runs the suite in this one process. (`--dist loadgroup` does not group under pytest 9:
# xdist 3.8 renames `item._nodeid`, which pytest 9 no longer reads.)
TEST_WORKERS ?= 2
test: setup
	@python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The fast tier: the tests in the fast folders of tests/helpers/tiers.py, guarded (tests/helpers/fast_tier.py): a test in it
# that imports pyspark or starts a JVM, spark-submit or Airflow fails.
test-fast: setup
	@python -m pytest --fast --basetemp=.spark/pytest-fast $(PYTEST_ARGS)

# Airflow for real on loopback (api-server, scheduler, dag-processor, triggerer), with this project's
# DAGs, plugins, environment and spark_default; every port-dependent setting is derived from
# AIRFLOW_PORT. `make stop` stops all of it and every driver it started (tools/local_airflow.py).
AIRFLOW_PORT ?= 8080
airflow: setup
	@python tools/local_airflow.py start --port $(AIRFLOW_PORT)

stop:
	@python tools/local_airflow.py stop

# The environment above as shell exports, for running airflow or the CLI by hand: eval "$$(make -s env)"
env:
	@env | grep -E '^(PATH|PYTHONPATH|AIRFLOW|PYSPARK_|SPARK_|LAKE_ROOT|CLOUDTRAIL_ETL_INPUT)' | sed -E "s/^([^=]+)=(.*)$$/export \1='\2'/"
	@echo 'unset PYTHONDONTWRITEBYTECODE'

# A standalone worker started without --work-dir keeps each application's folder in the pip Spark's work/.
clean:
	rm -rf lake landing .airflow .spark .pytest_cache spark-warehouse $(wildcard $(VENV)/lib/python3*/site-packages/pyspark/work)
