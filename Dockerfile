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
RUN apt-get update \
    && apt-get install -y --no-install-recommends openssh-client iperf3 gettext \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /app gpulease \
    && mkdir -p /var/lib/gpulease && chown gpulease /var/lib/gpulease

WORKDIR /app
COPY verifier ./verifier
COPY pyproject.toml README.md ./
COPY config ./config
COPY common ./common
COPY leases ./leases
COPY benchmarks ./benchmarks
COPY billing ./billing
COPY locale ./locale
COPY manage.py ./
COPY api ./api
COPY portal ./portal
COPY --from=assets /build/portal/static/portal/vendor ./portal/static/portal/vendor
RUN pip install --no-cache-dir ./verifier . \
    && pip install --no-cache-dir Babel \
    && pybabel -q compile --domain=django --directory=locale \
    && DJANGO_DEBUG=false SECRET_KEY=build-only STATIC_ROOT=/app/static \
       python manage.py collectstatic --no-input -v0

USER gpulease
ENV STATIC_ROOT=/app/static
EXPOSE 8000
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "4", "--access-logfile", "-"]
