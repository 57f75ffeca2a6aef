# syntax=docker/dockerfile:1
# One image runs every Strata process by command (docs/architecture.md, "Processes"):
#   strata broker --config FILE     the broker (the operator starts it via entrypoint.sh)
#   strata admin ...                the REST admin service
#   kopf run -A --standalone -m strata.operator.main    the operator
# Targets: `runtime` (default) and `spark` (runtime + a JRE and pyspark, for Spark jobs).
# The base is pinned by tag; both stages use the same one, so the venv's interpreter path holds.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------------- build
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY . .
# The runtime dependencies only (pinned in pyproject.toml): no test or chart tooling.
RUN python -m venv /opt/strata \
    && /opt/strata/bin/pip install --no-cache-dir ".[operator]"

FROM build AS build-spark
RUN /opt/strata/bin/pip install --no-cache-dir ".[operator,spark]"

# ---------------------------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE} AS runtime
ARG STRATA_UID=1000
RUN groupadd --system --gid "${STRATA_UID}" strata \
    && useradd --system --uid "${STRATA_UID}" --gid strata --home-dir /var/lib/strata \
       --shell /usr/sbin/nologin strata \
    && mkdir -p /var/lib/strata \
    && chown strata:strata /var/lib/strata
COPY --from=build /opt/strata /opt/strata
ENV PATH=/opt/strata/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /var/lib/strata
USER 1000:1000
# Kafka protocol, broker metrics/health, admin REST (operator health is 8080 in its own pod).
EXPOSE 9092 9404 8080
CMD ["strata", "--help"]

# ---------------------------------------------------------------------------------- spark
FROM runtime AS spark
USER 0:0
# Debian stable's default JRE (17 on bookworm): security updates replace exact versions, so
# the package is not pinned to one (the base image tag pins the Debian release).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends default-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build-spark /opt/strata /opt/strata
ENV JAVA_HOME=/usr/lib/jvm/default-java \
    PYSPARK_PYTHON=/opt/strata/bin/python \
    SPARK_LOCAL_IP=127.0.0.1
USER 1000:1000
CMD ["python", "-c", "import pyspark; print(pyspark.__version__)"]
