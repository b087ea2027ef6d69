# scanwatch: one image for the Dagster code location, the exporter and the CLI.
#
#   docker build -t scanwatch .
#   docker run scanwatch                                   # the exporter on :9817 (the default command)
#   docker run scanwatch scanwatch sync                    # one sync, then exit
#   docker run --init scanwatch dagster api grpc -h 0.0.0.0 -p 3030 -m pipelines.definitions   # the code location
#
# The code location wants an init in front (`--init`, compose's `init: true`, with TINI_KILL_PROCESS_GROUP=1):
# its runs are child processes, and without one they die by SIGKILL when the server stops
# (docs/operations.md, "Stopping").
#
# The wheel is built in a first stage and installed with constraints.txt, the versions the suite runs
# (tests/deploy/test_image_steps.py runs these steps on a fresh virtual environment, no engine needed).
# No ENTRYPOINT: Dagster's chart and the compose file give each container its whole command.

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md dagster.yaml ./
COPY pipelines/ pipelines/
COPY exporters/ exporters/
COPY simulator/ simulator/
COPY sql/ sql/
COPY prometheus/ prometheus/
COPY grafana/ grafana/
RUN pip wheel --no-deps --wheel-dir /dist .

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DAGSTER_HOME=/opt/dagster/dagster_home \
    SCANWATCH_DB=/var/lib/scanwatch/scanwatch.duckdb
RUN groupadd --system --gid 10001 scanwatch \
    && useradd --system --uid 10001 --gid scanwatch --home-dir /var/lib/scanwatch --create-home scanwatch \
    && install -d -o scanwatch -g scanwatch /opt/dagster/dagster_home
COPY constraints.txt /tmp/constraints.txt
COPY --from=build /dist/ /tmp/dist/
RUN pip install --no-compile -c /tmp/constraints.txt /tmp/dist/scanwatch-*.whl \
    && rm -rf /tmp/dist /tmp/constraints.txt
# Dagster's instance on PostgreSQL (DAGSTER_PG_* from the environment); a chart or compose may mount another.
COPY --chown=scanwatch:scanwatch deploy/dagster/dagster.yaml /opt/dagster/dagster_home/dagster.yaml
USER 10001:10001
WORKDIR /var/lib/scanwatch
EXPOSE 9817 3030
# The default command's check (the exporter); compose gives the other roles their own, Kubernetes uses probes.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request as r; r.urlopen('http://127.0.0.1:9817/-/healthy', timeout=4)"]
CMD ["scanwatch", "exporter"]
