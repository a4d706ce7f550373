# The portal's CSS framework and chart bundle, built from the npm registry at the versions
# package-lock.json pins, by the same Makefile rules as `make assets`.
FROM node:20-bookworm-slim AS assets
RUN apt-get update && apt-get install -y --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY package.json package-lock.json Makefile ./
COPY portal/assets ./portal/assets
RUN make assets

FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 GPULEASE_VAR_DIR=/var/lib/gpulease
# fonts-wqy-zenhei: the TrueType CJK font that invoice PDFs embed (billing/documents/pdf.py).
RUN apt-get update \
    && apt-get install -y --no-install-recommends openssh-client iperf3 gettext fonts-wqy-zenhei \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /app gpulease \
    && mkdir -p /var/lib/gpulease/keys /var/lib/gpulease/archive /tmp/gpulease-metrics \
    && chown -R gpulease /var/lib/gpulease /tmp/gpulease-metrics

WORKDIR /app
# The whole project; .dockerignore keeps out local state, build output, secrets and tests
# (tests/deploy/test_image_context.py installs and starts exactly this).
COPY . .
COPY --from=assets /build/portal/static/portal/vendor ./portal/static/portal/vendor
# collectstatic loads the production settings, which refuse to start without the keys:
# throwaway ones here, deleted at once. The real ones live on the volume that
# docker-compose.yml mounts at /var/lib/gpulease/keys (docs/operators/keys.md).
# Third-party packages only as requirements.lock pins them, hashes checked (make lock);
# then gpulease and gpulease-verify from this tree, with nothing fetched besides.
RUN pip install --no-cache-dir --require-hashes -r requirements.lock \
    && pip install --no-cache-dir --no-deps --no-build-isolation -e ./verifier -e . \
    && pybabel -q compile --domain=django --directory=locale \
    && export AUDIT_SIGNING_KEY=/tmp/build-keys/audit.pem PROBE_SSH_KEY=/tmp/build-keys/probe \
    && python -m config.keys create >/dev/null \
    && DJANGO_DEBUG=false SECRET_KEY=build-only STATIC_ROOT=/app/static \
       python manage.py collectstatic --no-input -v0 \
    && rm -rf /tmp/build-keys

USER gpulease
# prometheus_client's multiprocess mode: each gunicorn worker (and each Celery child) writes
# its counters under this folder, and /metrics merges them (monitoring/gunicorn.py).
ENV STATIC_ROOT=/app/static PROMETHEUS_MULTIPROC_DIR=/tmp/gpulease-metrics
EXPOSE 8000
# monitoring/gunicorn.py: gunicorn's own lines and one access line a request in LOG_FORMAT,
# each with the request id the app's lines carry; deploy/systemd starts the same command.
CMD ["gunicorn", "config.wsgi:application", "-c", "python:monitoring.gunicorn", \
     "--bind", "0.0.0.0:8000", "--workers", "4"]
