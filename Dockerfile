# The project's one image. Every service of docker-compose.yml runs it: Airflow's api-server, scheduler,
# dag-processor and triggerer, the Spark master and workers, and so the Spark drivers (spark-submit in
# client mode from the scheduler's tasks) and their executors, which must run the driver's Python.
#
# Built with the Makefile's own set-up steps (`make install`: the venv from requirements.txt; `make jars`:
# the pinned Delta jars from Maven Central, sha256-checked), so the image holds exactly what `make setup`
# gives a developer; tools/deploy_checks.py checks that these are the Makefile's steps. The versions
# passed by docker-compose.yml are checked against what was installed.
ARG PYTHON_VERSION=3.11
FROM python:${PYTHON_VERSION}-slim-bookworm

# Java for Spark, Maven for the jars, make for the set-up, procps for Spark's scripts.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jdk-headless maven make procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/project

# The stack (the slow layer: rebuilt only when requirements.txt or the Makefile changes).
COPY requirements.txt Makefile ./
RUN make install && rm -rf /root/.cache

# The Delta jars (rebuilt only when their pins change).
COPY spark_jobs/__init__.py spark_jobs/
COPY spark_jobs/model/ spark_jobs/model/
COPY spark_jobs/launch/ spark_jobs/launch/
RUN make jars && rm -rf /root/.m2

# What docker-compose.yml says it runs is what was installed.
ARG AIRFLOW_VERSION
ARG SPARK_VERSION
RUN .venv/bin/python -c "import sys, airflow, pyspark; \
got = {'airflow': airflow.__version__, 'spark': pyspark.__version__}; \
want = {'airflow': '${AIRFLOW_VERSION}', 'spark': '${SPARK_VERSION}'}; \
sys.exit(0 if got == want else f'docker-compose.yml builds {want}, requirements.txt installed {got}')"

# The code last (a code change rebuilds only this layer), and a user that owns the data folders.
COPY . .
RUN useradd --uid 50000 --gid 0 --home-dir /opt/airflow --create-home etl \
    && mkdir -p /data/lake /data/landing /data/spark-work /opt/airflow/logs .spark \
    && chown -R 50000:0 /data /opt/airflow .spark
USER 50000

# The venv's airflow, spark-submit and spark-class; the rest of the environment (the Makefile's, for
# Airflow's services) is set by docker-compose.yml. No PYTHONPATH here: the Spark workers' executors get
# the project's code from the driver (spark_jobs/launch/code_zip.py), as on any cluster.
ENV PATH=/opt/project/.venv/bin:$PATH
