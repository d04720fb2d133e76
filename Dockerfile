# Parley as a container: migrates, then serves on 0.0.0.0:8000.
# Configure with PARLEY_* variables (see the README); PARLEY_DATABASE_URL for PostgreSQL.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/parley

COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install . && useradd --system --home /srv/parley parley
COPY alembic.ini ./
COPY migrations ./migrations
RUN mkdir -p data && chown parley data

USER parley
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
CMD ["sh", "-c", "alembic upgrade head && exec uvicorn --factory app.main:create_app --host 0.0.0.0 --port 8000 --proxy-headers"]
