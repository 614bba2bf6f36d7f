# syntax=docker/dockerfile:1
# hookledger's image, in stages: wheels are built once (with constraints.txt, the known-good set),
# then installed into a slim runtime that keeps no compiler and no wheel files. Two targets:
#   docker build -t hookledger .                      every part, the dashboard included (default)
#   docker build --target core -t hookledger:core .   receiver, worker, publisher, scheduler: no
#                                                     dashboard stack (about a fifth of the size)
# deploy/compose.yaml runs every service from the default image.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY connectors ./connectors
COPY reconciler ./reconciler
COPY dashboard ./dashboard
RUN pip wheel --wheel-dir /wheels -c constraints.txt '.[dashboard,postgres]'

FROM python:3.11-slim AS core
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# the wheels are mounted, not copied: no layer keeps them
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    --mount=type=bind,source=constraints.txt,target=/tmp/constraints.txt \
    pip install --no-index --find-links /wheels -c /tmp/constraints.txt 'hookledger[postgres]' \
    && useradd --system --home-dir /var/lib/hookledger --create-home hookledger
USER hookledger
WORKDIR /var/lib/hookledger
# config.toml is mounted here; secrets and HOOKLEDGER_DATABASE_URL come from the environment
ENV HOOKLEDGER_CONFIG=/etc/hookledger/config.toml
# the receiver's own check; compose gives every other service its own
HEALTHCHECK --interval=30s --timeout=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=5)"]
ENTRYPOINT ["hookledger"]
CMD ["--help"]

FROM core AS full
USER root
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    --mount=type=bind,source=constraints.txt,target=/tmp/constraints.txt \
    pip install --no-index --find-links /wheels -c /tmp/constraints.txt 'hookledger[dashboard,postgres]'
USER hookledger
