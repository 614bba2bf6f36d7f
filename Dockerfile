# hookledger's image: the receiver, the worker, the scheduler and the dashboard all run from it
# (deploy/compose.yaml). Build it yourself: docker build -t hookledger .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/hookledger
COPY pyproject.toml README.md LICENSE ./
COPY connectors ./connectors
COPY reconciler ./reconciler
COPY dashboard ./dashboard
RUN pip install '.[postgres]' \
    && useradd --system --home-dir /var/lib/hookledger --create-home hookledger

USER hookledger
WORKDIR /var/lib/hookledger
# config.toml is mounted here; secrets and HOOKLEDGER_DATABASE_URL come from the environment
ENV HOOKLEDGER_CONFIG=/etc/hookledger/config.toml
ENTRYPOINT ["hookledger"]
CMD ["--help"]
