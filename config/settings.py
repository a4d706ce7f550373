"""Settings, all read from the environment (12-factor).

Without any variable set, gpulease runs on embedded defaults: a SQLite file and a
filesystem Celery broker under var/, DEBUG on and a generated local SECRET_KEY. Production
sets DJANGO_DEBUG=false, SECRET_KEY, ALLOWED_HOSTS, DATABASE_URL and CELERY_BROKER_URL.
"""

import ipaddress
import secrets
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from common.logs import log_format, logging_config
from config.beat import SCHEDULE as BEAT_SCHEDULE
from config.beat import TELEMETRY_TICK_S as TELEMETRY_BEAT_TICK_S

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("GPULEASE_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

env = environ.Env()

DEBUG = env.bool("DJANGO_DEBUG", default=True)


def _secret_key() -> str:
    key = env.str("SECRET_KEY", default="")
    if key:
        return key
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DJANGO_DEBUG is false.")
    # Local use only: generated once, kept under var/ so sessions survive restarts.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_celery_beat",
    "common",
    # The hash chain of every lease: appends, heads, reads, verifying (its kinds of link
    # are registered by leases, benchmarks and telemetry).
    "ledger",
    # Who is who in a tenant: memberships and their roles, API tokens and their standing.
    "accounts",
    "leases",
    "benchmarks",
    "incidents",
    "billing",
    "telemetry",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    # Content-Security-Policy (CONTENT_SECURITY_POLICY below): django-csp's system checks and
    # its csp_update decorator for the one page that needs more (the API's ReDoc).
    "csp",
    "api",
    "portal",
    "monitoring",
    # manage.py demo: loads the whole demo, so above every app it loads into.
    "demo",
]

MIDDLEWARE = [
    # Counts and times every request by URL name (gpulease_http_requests_total on /metrics).
    "monitoring.middleware.RequestMetricsMiddleware",
    "common.request_id.RequestIdMiddleware",
    # /healthz and /readyz: answered before the host check and the HTTPS redirect.
    "common.health.ProbeMiddleware",
    # /metrics likewise (monitoring.middleware): Prometheus scrapes http://web:8000 inside.
    "monitoring.middleware.MetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy and Permissions-Policy on every page, API answer and admin page.
    "csp.middleware.CSPMiddleware",
    "common.permissions_policy.PermissionsPolicyMiddleware",
    "api.middleware.ApiBodySizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # The portal's request budgets (PORTAL_RATE_LIMIT, AUDIT_BUNDLE_RATE_LIMIT).
    "portal.middleware.PortalRateLimitMiddleware",
    # Last, as django-axes asks: it answers a locked-out login with LOGIN_LOCKOUT's 429.
    "axes.middleware.AxesMiddleware",
]

# How many proxies in front of gunicorn append to X-Forwarded-For (docker-compose.yml's and
# deploy/'s Caddy: 1); 0 believes REMOTE_ADDR only. The one rule for the client address of
# login lockouts, API budgets, portal rate limits and the access log
# (common/client_address.py). API_NUM_PROXIES is its former name, still read.
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=env.int("API_NUM_PROXIES", default=0))

# Login throttling for the portal and the admin (django-axes): LOGIN_FAILURE_LIMIT failed
# logins for one username (from anywhere), or from one client address (for any username),
# lock that username, or that address, out for LOGIN_LOCKOUT_MINUTES. A success clears only
# the failures of that username from that address (common.login_attempts).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "common.login_attempts.OwnFailuresHandler"
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
AXES_LOCKOUT_TEMPLATE = "portal/locked_out.html"
AXES_VERBOSE = False
# A failed login's username as axes records it: cut to its varchar(255) column.
AXES_USERNAME_CALLABLE = "common.login_attempts.attempted_username"
# The address a lockout counts against: the client's by TRUSTED_PROXY_COUNT.
AXES_CLIENT_IP_CALLABLE = "common.client_address.client_address"

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'gpulease.sqlite3'}")}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=0)
# Every process's bounds on PostgreSQL (docs/operators/health-and-logs.md): a
# connection attempt gives up after DB_CONNECT_TIMEOUT_S (psycopg waits at least 2 s), and
# one statement after DB_STATEMENT_TIMEOUT_S, below gunicorn's 30 s, so a stuck query ends
# as an error the log explains instead of a killed worker. Long work runs with
# DB_STATEMENT_TIMEOUT_S=0 in that process's environment (gpulease then sets none and the
# server's or role's own applies): migrate, bill, bench, a large catch-up. The month
# archives lift it for their own transactions (common.archives).
DB_CONNECT_TIMEOUT_S = env.int("DB_CONNECT_TIMEOUT_S", default=5)
DB_STATEMENT_TIMEOUT_S = env.float("DB_STATEMENT_TIMEOUT_S", default=25.0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    _db_options = DATABASES["default"].setdefault("OPTIONS", {})
    _db_options.setdefault("connect_timeout", DB_CONNECT_TIMEOUT_S)
    if DB_STATEMENT_TIMEOUT_S > 0 and "statement_timeout" not in str(
        _db_options.get("options", "")
    ):
        _db_options["options"] = (
            f"-c statement_timeout={round(DB_STATEMENT_TIMEOUT_S * 1000)} "
            + str(_db_options.get("options", ""))
        ).strip()
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, worker, beat) share the file: wait for locks, don't fail.
    # IMMEDIATE takes the write lock when a transaction begins, so a reader never has to
    # upgrade (SQLite refuses that at once with "database is locked" instead of waiting).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Stored in UTC; shown in the tenant's zone, by default the providers' own.
USE_TZ = True
TIME_ZONE = env.str("DISPLAY_TIME_ZONE", default="Asia/Shanghai")
USE_I18N = True
LANGUAGE_CODE = env.str("LANGUAGE_CODE", default="zh-hans")
LANGUAGES = [("zh-hans", _("Simplified Chinese")), ("en", _("English"))]
LOCALE_PATHS = [BASE_DIR / "locale"]

STATIC_URL = "static/"
STATIC_ROOT = env.str("STATIC_ROOT", default=str(VAR_DIR / "static"))
Path(STATIC_ROOT).mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# Security: strict unless DEBUG; each can be relaxed behind a TLS-terminating proxy.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# What a page may load and run (django-csp): scripts and styles only as files from this
# site (no inline <script>, no style="" attribute, no eval), images from here or data:
# URLs, no plugins, no framing, forms posting only here. The portal passes data to its
# scripts with json_script and data-* attributes; the chart bundle needs no eval.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}
# Browser features no page of ours uses, denied to the page and anything it embeds
# (common.permissions_policy).
PERMISSIONS_POLICY = [
    "accelerometer",
    "autoplay",
    "camera",
    "display-capture",
    "geolocation",
    "gyroscope",
    "hid",
    "idle-detection",
    "magnetometer",
    "microphone",
    "midi",
    "payment",
    "publickey-credentials-get",
    "screen-wake-lock",
    "serial",
    "usb",
    "xr-spatial-tracking",
]

# Logs of web, worker and beat (common.logs): LOG_FORMAT=json writes one JSON object a line
# in UTC, each with the request id that the response carries in X-Request-ID ("-" outside
# a request); gunicorn writes one access line a request (monitoring.gunicorn).
try:
    LOG_FORMAT = log_format()
except ValueError as error:
    raise ImproperlyConfigured(str(error)) from None
# Take a proxy's request id from this header (e.g. X-Request-ID); empty: always generate.
REQUEST_ID_HEADER = env.str("REQUEST_ID_HEADER", default="")
LOGGING = logging_config(LOG_FORMAT, env.str("LOG_LEVEL", default="INFO"))

# Celery. The default broker is kombu's filesystem transport: no server to run.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    for sub in ("queue", "processed", "control"):
        (_broker_dir / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default="") or None
CELERY_TIMEZONE = "UTC"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# django-celery-beat's DatabaseScheduler, sending only while this beat holds the beat lock
# (BEAT_LOCK_TTL_S below), and touching BEAT_LIVENESS_FILE at each tick.
CELERY_BEAT_SCHEDULER = "config.beat_scheduler:SingleBeatScheduler"
# The schedule itself lives in config/beat.py.
CELERY_BEAT_SCHEDULE = BEAT_SCHEDULE
# With LOG_FORMAT=json, workers and beat keep LOGGING instead of Celery's own format
# (config.celery); plain keeps Celery's.

# Probes.
# Each site's probes go to this queue. "probes.{site}" lets a worker in each data centre
# consume its own site (celery -A config worker -Q probes.sz-ns1); the default sends them
# all to the default queue, for a single worker (make run, a one-host deployment).
PROBE_QUEUE_TEMPLATE = env.str("PROBE_QUEUE_TEMPLATE", default="celery")
# Every billing.* task (ingest, drafting, checkpoints, notifications) goes to this queue
# (config.celery.route_task), so that a worker of its own can run them (-Q billing); the
# default keeps them on the default queue beside everything else.
BILLING_QUEUE = env.str("BILLING_QUEUE", default="celery")
CELERY_TASK_ROUTES = ("config.celery.route_task",)
PROBE_SSH_KEY = Path(env.str("PROBE_SSH_KEY", default=str(VAR_DIR / "ssh" / "probe_ed25519")))
PROBE_CONNECT_TIMEOUT_S = env.float("PROBE_CONNECT_TIMEOUT_S", default=10.0)
# Passive telemetry (telemetry.services): the beat's tick, and how long one node's read
# may take over its kept-open connection.
TELEMETRY_TICK_S = TELEMETRY_BEAT_TICK_S
TELEMETRY_COMMAND_TIMEOUT_S = env.int("TELEMETRY_COMMAND_TIMEOUT_S", default=10)
# A healthy port's quiet intervals are stored merged, one row per this many seconds;
# an interval in which anything a rule reads moved is stored as it is, at once.
TELEMETRY_QUIET_ROW_S = env.int("TELEMETRY_QUIET_ROW_S", default=300)
# The switch-side witness: one SNMP request per switch, bounded.
WITNESS_SNMP_TIMEOUT_S = env.float("WITNESS_SNMP_TIMEOUT_S", default=2.0)
# Switches refresh port counters every few seconds (net-snmp's IF-MIB cache: 3 s): the
# reading after a throughput probe waits this long, so it counts the probe's last bytes.
WITNESS_SETTLE_S = env.float("WITNESS_SETTLE_S", default=4.0)
# Partitions and retention (common.partitions, common.archives; PostgreSQL only): months made
# ahead, months kept in the database, and where a month past that goes as an archive file.
PARTITIONS_AHEAD = env.int("PARTITIONS_AHEAD", default=3)
PARTITION_RETENTION_MONTHS = env.int("PARTITION_RETENTION_MONTHS", default=13)
ARCHIVE_DIR = Path(env.str("ARCHIVE_DIR", default=str(VAR_DIR / "archive")))
PROBE_THROUGHPUT_SECONDS = env.int("PROBE_THROUGHPUT_SECONDS", default=10)
# How long past its nominal duration a pair's client may run before it counts as hung.
PROBE_COMMAND_GRACE_S = env.int("PROBE_COMMAND_GRACE_S", default=60)
# Celery's hard limit on one probe batch; a run "running" longer belongs to a dead worker.
PROBE_TASK_TIME_LIMIT_S = env.int("PROBE_TASK_TIME_LIMIT_S", default=900)
# Tries per run when its node cannot be reached (transport faults only).
PROBE_MAX_ATTEMPTS = env.int("PROBE_MAX_ATTEMPTS", default=3)
# The longest a batch waits before trying again when its nodes are busy or a node could
# not be reached (15 s, doubling); one put back longer ago lost its retry (benchmarks.orphans).
PROBE_RETRY_MAX_S = env.int("PROBE_RETRY_MAX_S", default=300)
# Self-check: a site where runs fell due in the window but none finished raises an alert.
PROBE_SELF_CHECK_WINDOW_S = env.int("PROBE_SELF_CHECK_WINDOW_S", default=1800)
PROBE_SELF_CHECK_GRACE_S = env.int("PROBE_SELF_CHECK_GRACE_S", default=300)
# A tenant's run-now: refused (429) this long after the lease's last run-now runs were over.
RUN_NOW_COOLDOWN_S = env.int("RUN_NOW_COOLDOWN_S", default=300)

# Invoices (billing.services). Issued invoices are numbered PREFIX-YYYY-NNNNNN and credit
# notes PREFIX-CN-YYYY-NNNNNN, gap-free per seller and year of issue. The seller block is
# frozen onto every invoice when it is issued; the defaults are the demo's, not a company.
INVOICE_NUMBER_PREFIX = env.str("INVOICE_NUMBER_PREFIX", default="GL")
INVOICE_PAYMENT_TERMS_DAYS = env.int("INVOICE_PAYMENT_TERMS_DAYS", default=30)
INVOICE_SELLER = {
    "legal_name": env.str("INVOICE_SELLER_LEGAL_NAME", default="深圳示例智算科技有限公司"),
    "tax_id": env.str("INVOICE_SELLER_TAX_ID", default="91440300MA5F00001A"),
    "address": env.str("INVOICE_SELLER_ADDRESS", default="深圳市南山区科技园示例路 1 号"),
    "phone": env.str("INVOICE_SELLER_PHONE", default="0755-00000000"),
    "bank": env.str("INVOICE_SELLER_BANK", default="示例银行深圳分行"),
    "account": env.str("INVOICE_SELLER_ACCOUNT", default="0000 0000 0000 0000"),
}
# The 数电票 payload (billing.documents.einvoice): each invoice line kind's 税收分类编码
# (19 digits, from the 商品和服务税收分类编码表) with the category's short name (the
# *...* in front of an item's name) and the item's name. These are plausible picks under
# 信息技术服务 (30402: 3040203 信息系统服务, 3040205 信息系统增值服务), NOT advice: the
# provider's tax advisor must confirm them before a payload is submitted. A line whose kind
# has no entry makes the export refuse the invoice. SLA credits and adjustments carry the
# code of the service they reduce or correct (a discount line is coded like its item).
EINVOICE_TAX_CODES = {
    "node_rent": {
        "code": "3040205000000000000",
        "short_name": "信息技术服务",
        "name": "GPU算力服务",
    },
    "network_fee": {
        "code": "3040203000000000000",
        "short_name": "信息技术服务",
        "name": "网络带宽服务",
    },
    "usage_gb": {
        "code": "3040203000000000000",
        "short_name": "信息技术服务",
        "name": "网络流量服务",
    },
    "usage_p95": {
        "code": "3040203000000000000",
        "short_name": "信息技术服务",
        "name": "网络带宽服务",
    },
    "sla_credit": {
        "code": "3040203000000000000",
        "short_name": "信息技术服务",
        "name": "网络带宽服务",
    },
    "adjustment": {
        "code": "3040205000000000000",
        "short_name": "信息技术服务",
        "name": "服务费调整",
    },
}

# The provider's current Ed25519 key that signs contract audit bundles and chain checkpoints
# (billing.audit_keys). Empty: VAR_DIR/audit/ed25519.pem, created on first use. Retired
# keys' public halves are listed in audit-keys.json beside it (audit_key --rotate).
AUDIT_SIGNING_KEY = env.str("AUDIT_SIGNING_KEY", default="")
if not DEBUG:
    # Production never makes a key on first use: each container would make its own and
    # lose it on restart (old bundles no longer verify). Both come from a shared volume
    # or mounted secrets, provisioned once with `python -m config.keys create`
    # (docs/operators/keys.md).
    from config.keys import missing_keys

    _missing = missing_keys(
        {
            "AUDIT_SIGNING_KEY": Path(AUDIT_SIGNING_KEY or VAR_DIR / "audit" / "ed25519.pem"),
            "PROBE_SSH_KEY": PROBE_SSH_KEY,
        }
    )
    if _missing:
        raise ImproperlyConfigured(
            "With DJANGO_DEBUG=false the keys must be provisioned, and these are missing: "
            + ", ".join(_missing)
            + ". Create them once with `python -m config.keys create` on the volume or "
            "secret every container mounts (docs/operators/keys.md)."
        )

# Readiness (/readyz, common.health): each check of a dependency the web process needs
# (database, cache, broker) gets this long, all side by side, so /readyz answers within it
# whatever hangs. Beat is not one of them: its own healthcheck (`manage.py readiness --check
# beat`) reads the file its scheduler touches at every tick (config.beat_scheduler), and the
# alert GpuleaseBeatHeartbeatMissing watches the heartbeat task it sends.
READYZ_TIMEOUT_S = env.float("READYZ_TIMEOUT_S", default=1.5)
BEAT_LIVENESS_FILE = Path(env.str("BEAT_LIVENESS_FILE", default=str(VAR_DIR / "beat-alive")))
BEAT_LIVENESS_MAX_AGE_S = env.int("BEAT_LIVENESS_MAX_AGE_S", default=60)
# One beat schedules at a time (common.beat_lock): the one holding the lock renews it at
# each tick (at least every 5 s) for this long; another beat takes over once it runs out.
BEAT_LOCK_TTL_S = env.int("BEAT_LOCK_TTL_S", default=30)
if BEAT_LOCK_TTL_S < 10:
    raise ImproperlyConfigured(
        "BEAT_LOCK_TTL_S must be at least 10 s: beat ticks up to 5 s apart, and a lease "
        "shorter than two ticks would pass from beat to beat while its holder is alive."
    )
if CELERY_BROKER_URL.startswith("redis"):
    # Unacknowledged tasks (a worker killed mid-probe) come back after this; it must
    # exceed the task time limit so a live worker's task is never handed out twice.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int(
            "CELERY_VISIBILITY_TIMEOUT_S", default=PROBE_TASK_TIME_LIMIT_S + 300
        )
    }

# Mail (incident e-mail to tenants, site alerts to ADMINS) goes through this SMTP server:
# STARTTLS with EMAIL_USE_TLS (port 587), implicit TLS with EMAIL_USE_SSL (465); the
# server's certificate is verified against the system's CAs (or SSL_CERT_FILE). With
# EMAIL_HOST unset, DEBUG prints mail to the console.
EMAIL_HOST = env.str("EMAIL_HOST", default="")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured(
        "Set one of EMAIL_USE_TLS (STARTTLS, port 587) and EMAIL_USE_SSL (TLS, port 465)."
    )
# Django's default is to wait forever on a server that does not answer.
EMAIL_TIMEOUT = env.float("EMAIL_TIMEOUT_S", default=10.0)
DEFAULT_FROM_EMAIL = env.str("EMAIL_FROM", default="gpulease <noreply@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
EMAIL_BACKEND = env.str(
    "EMAIL_BACKEND",
    default="django.core.mail.backends.console.EmailBackend"
    if DEBUG and not EMAIL_HOST
    else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = EMAIL_HOST or "localhost"
ADMINS = [("gpulease operators", a) for a in env.list("ADMIN_EMAILS", default=[])]

# Incident webhooks (incidents.notifications) go only to public addresses (common.egress).
# WEBHOOK_ALLOWED_NETWORKS opens named ranges, comma-separated CIDRs such as
# 10.20.0.0/16 for a receiver on the provider's own network; cloud metadata addresses stay
# closed. A CIDR with host bits set (10.20.0.1/16) stops the start, as it is likely a typo.
WEBHOOK_ALLOWED_NETWORKS = [
    ipaddress.ip_network(cidr.strip()) for cidr in env.list("WEBHOOK_ALLOWED_NETWORKS", default=[])
]
WEBHOOK_CONNECT_TIMEOUT_S = env.float("WEBHOOK_CONNECT_TIMEOUT_S", default=3.0)
WEBHOOK_READ_TIMEOUT_S = env.float("WEBHOOK_READ_TIMEOUT_S", default=5.0)
# Webhooks are signed the Standard Webhooks way (webhook-id, webhook-timestamp,
# webhook-signature). Until receivers have moved, each delivery also carries the old
# X-Gpulease-Signature (HMAC of the body alone, replayable) and X-Gpulease-Delivery; set
# false once they have (docs/billing/sla.md, Notifications).
WEBHOOK_LEGACY_HEADERS = env.bool("WEBHOOK_LEGACY_HEADERS", default=True)
# After a rotation the replaced signing secret keeps signing too (a second signature in
# webhook-signature) for this long, so a tenant's receivers can switch without a gap.
WEBHOOK_SECRET_OVERLAP_HOURS = env.float("WEBHOOK_SECRET_OVERLAP_HOURS", default=24.0)

# Monitoring (monitoring/): who may scrape /metrics (a bearer token, and/or addresses), how
# long a lease's credit at risk is cached, and the token Alertmanager's webhook presents.
# With neither METRICS_TOKEN nor METRICS_ALLOWED_NETWORKS, /metrics answers loopback when
# DEBUG and 403 otherwise.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_ALLOWED_NETWORKS = [
    ipaddress.ip_network(cidr.strip()) for cidr in env.list("METRICS_ALLOWED_NETWORKS", default=[])
]
METRICS_CREDIT_CACHE_S = env.int("METRICS_CREDIT_CACHE_S", default=300)
METRICS_CREDIT_REFRESH_PER_SCRAPE = env.int("METRICS_CREDIT_REFRESH_PER_SCRAPE", default=25)
ALERTMANAGER_TOKEN = env.str("ALERTMANAGER_TOKEN", default="")

# The cache holds the API's rate-limit counters. In production CACHE_URL names Redis, so
# every gunicorn worker counts against the same budget; the default is per process.
CACHE_URL = env.str("CACHE_URL", default="")
# A cache that does not answer fails a request within these, instead of hanging it.
CACHE_TIMEOUT_S = env.float("CACHE_TIMEOUT_S", default=1.0)
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": CACHE_URL,
        "OPTIONS": {"socket_connect_timeout": CACHE_TIMEOUT_S, "socket_timeout": CACHE_TIMEOUT_S},
    }
    if CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# REST API (api/). Token or session authentication; every 4xx answers
# {"error": {"code", "message", "fields"}}; one rate per token (else per user, else per IP).
API_RATE_LIMIT = env.str("API_RATE_LIMIT", default="600/min")
API_ANON_RATE_LIMIT = env.str("API_ANON_RATE_LIMIT", default="60/min")
API_AUTH_FAILURE_LIMIT = env.str("API_AUTH_FAILURE_LIMIT", default="20/min")
# Customer evidence a lease may hold (billing.evidence): pieces, and bytes of raw output in
# all (one piece is at most 1 MiB).
EVIDENCE_MAX_PER_LEASE = env.int("EVIDENCE_MAX_PER_LEASE", default=500)
EVIDENCE_MAX_BYTES_PER_LEASE = env.int("EVIDENCE_MAX_BYTES_PER_LEASE", default=64 * 1024 * 1024)
# Portal pages per signed-in user (else per address), and signed audit bundles per user,
# portal and API together (each takes seconds to build); empty: no limit.
PORTAL_RATE_LIMIT = env.str("PORTAL_RATE_LIMIT", default="120/min")
AUDIT_BUNDLE_RATE_LIMIT = env.str("AUDIT_BUNDLE_RATE_LIMIT", default="30/hour")
# Every API token expires: after this many days unless asked otherwise, and never later
# than the maximum.
API_TOKEN_DEFAULT_DAYS = env.int("API_TOKEN_DEFAULT_DAYS", default=90)
API_TOKEN_MAX_DAYS = env.int("API_TOKEN_MAX_DAYS", default=365)
# Active (neither revoked nor expired) tokens a tenant, and one user, may hold: each token
# has its own API_RATE_LIMIT, so the caps bound what one tenant can ask of the API.
API_TOKENS_PER_TENANT = env.int("API_TOKENS_PER_TENANT", default=50)
API_TOKENS_PER_USER = env.int("API_TOKENS_PER_USER", default=10)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.throttling.AddressGuard",
        "api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["api.permissions.RolePermission"],
    "DEFAULT_THROTTLE_CLASSES": [
        "api.throttling.TokenRateThrottle",
        "api.throttling.AnonymousRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "api": API_RATE_LIMIT,
        "anon": API_ANON_RATE_LIMIT,
        "auth_failure": API_AUTH_FAILURE_LIMIT,
    },
    # DRF's own reading of the client address agrees with common.client_address.
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
    "DEFAULT_PARSER_CLASSES": ["api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "api.pagination.PagePagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "api.exceptions.exception_handler",
    "DATETIME_FORMAT": "iso-8601",
    "COERCE_DECIMAL_TO_STRING": True,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "gpulease API",
    "DESCRIPTION": (
        "Leases of multi-node GPU clusters, the probes of their inter-node network, SLA "
        "reports and invoices. Authenticate with `Authorization: Bearer gpl_...`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "ProbeKindEnum": "leases.choices.ProbeKind",
        "LeaseStatusEnum": "leases.choices.LeaseStatus",
        "NodeStatusEnum": "leases.choices.NodeStatus",
        "RunStateEnum": "benchmarks.choices.RunState",
        "IncidentStateEnum": "incidents.choices.IncidentState",
        "InvoiceStatusEnum": "billing.choices.InvoiceStatus",
        "LineKindEnum": "billing.choices.LineKind",
        "CreditNoteKindEnum": "billing.choices.CreditNoteKind",
        "TokenStateEnum": "accounts.choices.TokenState",
        "ProbeToolEnum": "benchmarks.choices.Tool",
        "EvidenceToolEnum": "billing.models.evidence.EvidenceTool",
        "ThresholdKindEnum": "billing.choices.ThresholdKind",
    },
    # The ways to authenticate (AddressGuard only refuses, so it is no scheme of its own).
    "AUTHENTICATION_WHITELIST": [
        "api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schema.add_error_responses",
    ],
    # Swagger UI and ReDoc assets come from drf-spectacular-sidecar: served by gpulease.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
