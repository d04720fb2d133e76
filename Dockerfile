# Parley as a container: serves on 0.0.0.0:8000 as the non-root user `parley`.
# Configure it with PARLEY_* variables (docs/settings.md); scaling out: docs/deploy.md.

# --- build: the locked dependencies (requirements.lock, hashes checked) in a virtualenv ---
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
COPY requirements.lock /tmp/requirements.lock
RUN /opt/venv/bin/pip install --require-hashes --no-deps -r /tmp/requirements.lock

# --- runtime: that virtualenv and the source; no pip cache, no build stage layers ---
FROM python:3.11-slim AS runtime
# Migrate before serving (an advisory lock lets replicas start together); log JSON lines.
# FORWARDED_ALLOW_IPS: whose X-Forwarded-* headers uvicorn trusts; set it to your proxy's address.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH \
    PARLEY_MIGRATE_ON_START=true PARLEY_LOG_FORMAT=json FORWARDED_ALLOW_IPS=*
RUN useradd --system --uid 10001 --user-group --home-dir /srv/parley --create-home parley
WORKDIR /srv/parley
COPY --from=build /opt/venv /opt/venv
COPY alembic.ini ./
COPY migrations ./migrations
COPY app ./app
RUN mkdir -p data && chown parley:parley data

USER parley
EXPOSE 8000
# Healthy = alive (/healthz) and ready (/readyz: database answers, schema at the head).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-m", "app.healthcheck"]
# asyncio's event loop, which takes in every waiting connection at once (docs/deploy.md, "The
# event loop"); httptools with a bounded request head: 64 KiB, complete within 10 s ("Request
# heads"); proxy headers honoured; on SIGTERM uvicorn stops accepting and gives open
# requests (streams) 30 s, more than the run drain (PARLEY_SHUTDOWN_DRAIN_SECONDS, 5 s), before
# it closes them. The log config puts uvicorn's own lines in PARLEY_LOG_FORMAT from the start
# (and those of its parent process, if you add --workers N).
CMD ["uvicorn", "--factory", "app.main:create_app", "--host", "0.0.0.0", "--port", "8000", \
     "--loop", "asyncio", "--http", "app.server:BoundedHttpToolsProtocol", "--proxy-headers", \
     "--timeout-graceful-shutdown", "30", "--log-config", "app/observability/uvicorn-logging.json"]
