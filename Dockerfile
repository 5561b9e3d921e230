# zkpy's container image: the official zookeeper image's variables, volumes and ports, with zkpy
# as the entrypoint (`zkpy server --from-env`) under tini. docs/operations.md, "Running in
# containers and Kubernetes". BASE: any Debian-based image with python3 (3.11 or later) and venv.
ARG BASE=python:3.12-slim-bookworm
FROM ${BASE}

ENV ZOO_CONF_DIR=/conf \
    ZOO_DATA_DIR=/data \
    ZOO_DATA_LOG_DIR=/datalog \
    ZOO_LOG_DIR=/logs \
    PATH=/opt/zkpy/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

RUN set -eux; \
    command -v tini || { apt-get update; apt-get install -y --no-install-recommends tini; rm -rf /var/lib/apt/lists/*; }; \
    groupadd -r zookeeper --gid=1000; \
    useradd -r -g zookeeper --uid=1000 --home-dir /data zookeeper; \
    mkdir -p /conf /data /datalog /logs; \
    chown zookeeper:zookeeper /conf /data /datalog /logs

# with a wheels/ directory in the build context (pip wheel -w wheels .), nothing is downloaded
COPY . /src/
RUN set -eux; \
    python3 -m venv /opt/zkpy; \
    if [ -d /src/wheels ]; then \
        /opt/zkpy/bin/pip install --no-cache-dir --no-compile --no-index --find-links /src/wheels zkpy-server; \
    else \
        /opt/zkpy/bin/pip install --no-cache-dir --no-compile /src; \
    fi; \
    rm -rf /src

USER 1000:1000
WORKDIR /data
VOLUME ["/data", "/datalog", "/logs"]
EXPOSE 2181 2888 3888 8080 7000
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s CMD ["zkpy", "probe", "ready", "--quiet"]
ENTRYPOINT ["tini", "--", "zkpy", "server", "--from-env"]
