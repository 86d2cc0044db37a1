"""Django settings for Corral, read from the environment.

Development defaults apply only when DEBUG is on; with DEBUG off, SECRET_KEY and
ALLOWED_HOSTS must come from the environment.
"""

import hashlib
import ipaddress
import os
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CORRAL_VAR_DIR", BASE_DIR / "var"))


def env_flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_limit(name: str, default: str) -> int | None:
    """A quota's limit from the environment: a whole number, or None for "unlimited"."""
    value = os.environ.get(name, default).strip().lower()
    return None if value in ("unlimited", "none", "-1") else int(value)


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if not value:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


DEBUG = env_flag("DEBUG")

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set in the environment when DEBUG is off.")
    SECRET_KEY = "corral-development-only-not-secret"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # First: `manage.py runserver` is then Daphne's, serving project.asgi as `make serve` does.
    "daphne",
    "project.apps.CorralAdminConfig",  # django.contrib.admin with the dashboard
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    # Hashed, expiring tokens; its model swapped for Corral's (project.APIToken).
    "knox",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "django_q",
    "csp",
    "channels",
    "project",
    "hosts",
    "scheduling",
    "pools",
    "leases",
    "openstack",
]
# The lab (simulated and QEMU lab hosts, the tiny guest, their commands) is for development and
# tests only: installed with DEBUG on (make run) and by the test settings (make test, make
# bench), never in production, which then refuses simulator URIs.
if DEBUG:
    INSTALLED_APPS.append("lab")

MIDDLEWARE = [
    # One line per request on the corral.access logger (project/web/access_log.py).
    "project.web.access_log.AccessLogMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files from the web process (WhiteNoise; collected to STATIC_ROOT by `make serve`).
    "project.web.static_files.StaticFilesMiddleware",
    "project.web.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "project.api.middleware.ApiRequestMiddleware",
    # The database unreachable: 503 with Retry-After, never a 500 (project/web/database_down.py).
    "project.web.database_down.DatabaseUnavailableMiddleware",
]

# The largest request body Django reads into memory (JSON and form fields; a larger one is a
# 413). File parts of multipart uploads are not counted: they stream to disk.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Database: PostgreSQL (psycopg 3) from DATABASE_URL; otherwise an SQLite file under var/,
# in WAL mode with immediate transactions so the web server and the task cluster can share it.
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    # Kept open for reuse by the thread that opened it (task clusters, WSGI). Under ASGI each
    # request has a connection of its own, which this would leave open after it: the ASGI
    # server takes its connections from a pool instead (below) or sets CONN_MAX_AGE=0.
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL,
            conn_max_age=int(os.environ.get("CONN_MAX_AGE", "60")),
            # A kept connection (and, under `make serve`, a pooled one) is checked before it
            # is used: after PostgreSQL restarts, requests and task workers open fresh ones
            # instead of failing on those its restart closed.
            conn_health_checks=True,
        )
    }
    # A pool of at most this many connections per process (psycopg_pool; 0: none). Under ASGI
    # nothing else bounds how many requests use the database at once: `make serve` sets it.
    CORRAL_DB_POOL_SIZE = int(os.environ.get("CORRAL_DB_POOL_SIZE", "0"))
    if CORRAL_DB_POOL_SIZE > 0:
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            # Kept open (and opened before the process serves, project/web/worker.py), so
            # that a new process's first burst (a restart's reconnecting pages) finds some
            # there; the rest are opened as the load asks and closed when idle, so that an
            # idle tier, or two beside each other during a deploy, hold few of the server's.
            "min_size": min(CORRAL_DB_POOL_SIZE, int(os.environ.get("CORRAL_DB_POOL_MIN", "4"))),
            "max_size": CORRAL_DB_POOL_SIZE,
            # How long a request waits for a connection before it is answered 503 (the pool
            # at its size, or the database unreachable).
            "timeout": float(os.environ.get("CORRAL_DB_POOL_TIMEOUT", "10")),
            # A connection that cannot be opened is tried again with a growing delay for this
            # long, then afresh when a request asks: the pool's default (5 minutes) would leave
            # a process waiting seconds, or minutes, for its next try after PostgreSQL is back.
            "reconnect_timeout": 5,
        }
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SQLITE_PATH") or VAR_DIR / "corral.sqlite3",
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    # Plain authentication (passwords) plus model permissions for superusers.
    "django.contrib.auth.backends.ModelBackend",
    # Role grants at a scope, with inheritance: the one permission path
    # (project/access/permissions.py).
    "project.access.permissions.RoleBackend",
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
# Dates and times as the admin console and the portal show them, alike (project/formats/).
FORMAT_MODULE_PATH = ["project.formats"]

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "static"))

LOGIN_URL = "portal:login"
LOGIN_REDIRECT_URL = "portal:home"
LOGOUT_REDIRECT_URL = "portal:login"
# Log-in lockout (project/lockout/): this many failed log-ins for one username from one
# address within the window refuse that username from that address, and this many failures
# from one address (any usernames) refuse that address, until they leave the window (0 turns
# either limit off).
CORRAL_LOGIN_MAX_FAILURES = int(os.environ.get("CORRAL_LOGIN_MAX_FAILURES", "5"))
CORRAL_LOGIN_MAX_FAILURES_PER_ADDRESS = int(
    os.environ.get("CORRAL_LOGIN_MAX_FAILURES_PER_ADDRESS", "20")
)
CORRAL_LOGIN_LOCKOUT_MINUTES = float(os.environ.get("CORRAL_LOGIN_LOCKOUT_MINUTES", "15"))
# How long tokens last (project/access/tokens.py): an API token (/api/auth/token/, the portal's
# Tokens page), and a Keystone log-in's (Keystone's own default: an hour).
CORRAL_API_TOKEN_DAYS = float(os.environ.get("CORRAL_API_TOKEN_DAYS", "30"))
CORRAL_KEYSTONE_TOKEN_MINUTES = float(os.environ.get("CORRAL_KEYSTONE_TOKEN_MINUTES", "60"))
KNOX_TOKEN_MODEL = "project.APIToken"
# Knox's own migrations make the table of its model, which Corral's replaces: none of them run.
MIGRATION_MODULES = {"knox": None}
# Reverse proxies (addresses or networks) whose X-Forwarded-For is believed for the client's
# address (project/web/client_address.py); from anywhere else the header is ignored.
CORRAL_TRUSTED_PROXIES = env_list("CORRAL_TRUSTED_PROXIES", [])
for _proxy in CORRAL_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"CORRAL_TRUSTED_PROXIES: {_proxy!r} is not an address or a network."
        ) from None

# django-guardian stores role grants; Corral resolves them itself (project/access/permissions.py),
# so guardian's own backend and anonymous user are not used.
ANONYMOUS_USER_NAME = None
GUARDIAN_RAISE_403 = False
SILENCED_SYSTEM_CHECKS = ["guardian.W001"]

REST_FRAMEWORK = {
    # Token first: an unauthenticated request gets 401 with "WWW-Authenticate: Token".
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "project.access.tokens.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "project.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "project.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "project.filters.ScopedFilterBackend",
        "project.filters.OrderingFilter",
        "project.filters.SearchFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "project.api.schema.CorralAutoSchema",
    "EXCEPTION_HANDLER": "project.api.errors.exception_handler",
    "SEARCH_PARAM": "q",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Corral API",
    "DESCRIPTION": "Virtual machines on a fleet of libvirt hosts: inventory, pools, leases, jobs.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # An affinity group's VM rule and host rule share one set of choices: one enum in the schema.
    "ENUM_NAME_OVERRIDES": {
        "AffinityRuleEnum": "scheduling.models.AffinityRule",
        "ImageKindEnum": "hosts.models.images.ImageKind",
        "ImageStatusEnum": "hosts.models.images.ImageStatus",
        "ImageVisibilityEnum": "hosts.models.images.ImageVisibility",
        "ImageMemberStatusEnum": "hosts.models.images.MemberStatus",
        "JobErrorCodeEnum": "hosts.error_codes.JobErrorCode.choices",
        "JobKindEnum": "hosts.models.jobs.JobKind",
        "JobStateEnum": "hosts.models.jobs.JobState",
        "TemplateVisibilityEnum": "hosts.models.inventory.TemplateVisibility",
        "TokenKindEnum": "project.models.TokenKind",
    },
    # The registered refusal codes (project/error_codes.py) as the RefusalCode component.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "project.api.schema.add_refusal_codes",
    ],
}

# django-q2: the ORM broker by default (no extra service), Redis when REDIS_URL is set.
REDIS_URL = os.environ.get("REDIS_URL", "")
Q_CLUSTER = {
    "name": os.environ.get("Q_CLUSTER_NAME", "corral"),
    "workers": int(os.environ.get("Q_WORKERS", "4")),
    "timeout": 300,
    "retry": 360,
    "max_attempts": 1,
    "catch_up": False,
    "ack_failures": True,
    "label": "Tasks",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
    Q_CLUSTER["poll"] = float(os.environ.get("Q_POLL", "0.5"))

# The lab's simulated hosts (manage.py simhosts): one folder per libvirt daemon. Under /tmp by
# default, since the daemons run as an unprivileged user who must be able to reach the folder.
CORRAL_SIMHOSTS_DIR = Path(
    os.environ.get(
        "CORRAL_SIMHOSTS_DIR",
        f"/tmp/corral-simhosts/{hashlib.sha1(str(BASE_DIR).encode()).hexdigest()[:8]}",
    )
)
# The tiny guest real QEMU hosts boot (lab/tinyguest.py): built once per package versions.
CORRAL_TINYGUEST_DIR = Path(os.environ.get("CORRAL_TINYGUEST_DIR", VAR_DIR / "tinyguest"))
# The Debian cloud image the lab builds (lab/cloudimage.py): outside the checkout, so every
# checkout and CI run on this machine shares one build per package versions.
CORRAL_CLOUDIMAGE_DIR = Path(
    os.environ.get("CORRAL_CLOUDIMAGE_DIR", "/var/cache/corral/cloudimage")
)
# Corral's own SSH key pair (made on first use) and the known-hosts files of the host keys it
# trusts, for hosts reached over SSH (hosts/sshtrust.py): share it between the machines that
# run task clusters and web processes (or give each the same files), readable only by Corral.
CORRAL_SSH_DIR = Path(os.environ.get("CORRAL_SSH_DIR", VAR_DIR / "ssh"))
# Uploaded images (disks, kernels, initrds), before they are copied to hosts' storage pools.
CORRAL_IMAGE_STORE = Path(os.environ.get("CORRAL_IMAGE_STORE", VAR_DIR / "images"))
CORRAL_IMAGE_MAX_BYTES = int(os.environ.get("CORRAL_IMAGE_MAX_BYTES", str(64 * 1024**3)))
# How long a VM start waits for another job's copy of an image to the same host.
CORRAL_IMAGE_COPY_WAIT = float(os.environ.get("CORRAL_IMAGE_COPY_WAIT", "600"))
# How often the sync checks which hosts share each host's storage pool folder (a host whose
# storage settings change is checked at its next sync).
CORRAL_STORAGE_CHECK_INTERVAL = float(os.environ.get("CORRAL_STORAGE_CHECK_INTERVAL", "300"))

# Logs go to stderr, as plain text or (CORRAL_LOG_FORMAT=json) one JSON object per line.
CORRAL_LOG_FORMAT = os.environ.get("CORRAL_LOG_FORMAT", "plain")
if CORRAL_LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured("CORRAL_LOG_FORMAT must be plain or json.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "project.logging.JsonFormatter"},
    },
    "filters": {"routine_tasks": {"()": "project.logging.RoutineTaskLines"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": CORRAL_LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's own configuration gives "django" a console handler of its own under DEBUG;
        # its records reach the root's handler anyway, so that one would print each twice.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.db.backends": {"level": "INFO"},
        # A refusal (4xx) is in the access line already; errors (5xx) are logged with their
        # traceback.
        "django.request": {"level": "ERROR"},
        "django-q": {"filters": ["routine_tasks"]},
    },
}

# HTTPS. In production (DEBUG off) a reverse proxy ends TLS and tells Django the scheme in
# X-Forwarded-Proto (it must overwrite any such header a client sent). Everything that only
# makes sense over HTTPS (Secure cookies, HSTS, the redirect) follows SECURE_COOKIES, which a
# plain-HTTP test install turns off.
HTTPS_ONLY = not DEBUG and env_flag("SECURE_COOKIES", True)
if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = HTTPS_ONLY
CSRF_COOKIE_SECURE = HTTPS_ONLY
SECURE_SSL_REDIRECT = HTTPS_ONLY and env_flag("SECURE_SSL_REDIRECT", True)
# HSTS: browsers that saw the header refuse plain HTTP to this host (and its subdomains) for
# that long. Preloading commits the whole domain, for months, in every browser: the domain
# owner's decision, not the application's. Off unless asked for, so Django's reminder to turn
# it on (security.W021) is silenced; on only with what the preload list requires.
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000")) if HTTPS_ONLY else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_flag("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_flag("SECURE_HSTS_PRELOAD")
if SECURE_HSTS_SECONDS < 0:
    raise ImproperlyConfigured("SECURE_HSTS_SECONDS must be 0 or more.")
if SECURE_HSTS_PRELOAD and not (
    HTTPS_ONLY and SECURE_HSTS_INCLUDE_SUBDOMAINS and SECURE_HSTS_SECONDS >= 31536000
):
    raise ImproperlyConfigured(
        "SECURE_HSTS_PRELOAD needs HTTPS (SECURE_COOKIES on), SECURE_HSTS_INCLUDE_SUBDOMAINS "
        "and SECURE_HSTS_SECONDS of at least 31536000 (one year)."
    )
if not SECURE_HSTS_PRELOAD:
    SILENCED_SYSTEM_CHECKS.append("security.W021")

# Headers on every response, in development too.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): scripts, styles, images and requests from this site
# only; no inline script or style, no eval, no plugins, never framed. The few pages that need
# more get it in project/web/csp.py.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# Timing of Corral's background loops (seconds unless named otherwise).
CORRAL_SYNC_INTERVAL = float(os.environ.get("CORRAL_SYNC_INTERVAL", "5"))
# Threads each task cluster syncs its share of the hosts with (hosts/sync/loop.py).
CORRAL_SYNC_THREADS = int(os.environ.get("CORRAL_SYNC_THREADS", "4"))
# How often guests' addresses, VNC ports and serial console tails are read
# (hosts/guests/guestinfo.py), and at most how many VMs of one host each round reads.
CORRAL_GUEST_INFO_INTERVAL = float(os.environ.get("CORRAL_GUEST_INFO_INTERVAL", "10"))
CORRAL_GUEST_INFO_MAX_VMS = int(os.environ.get("CORRAL_GUEST_INFO_MAX_VMS", "500"))
# How long a guest_keys job waits for a guest agent that does not answer yet (a booting guest).
CORRAL_GUEST_KEYS_WAIT = float(os.environ.get("CORRAL_GUEST_KEYS_WAIT", "90"))
# A console ticket (POST /api/vms/{id}/console/) is good for this many seconds, once (max 60).
CORRAL_CONSOLE_TICKET_SECONDS = min(60, int(os.environ.get("CORRAL_CONSOLE_TICKET_SECONDS", "30")))
# The VNC password a redeemed ticket sets on the guest's screen is good for this many seconds
# (max 60): the relay authenticates with it at once; an open session outlives it.
CORRAL_CONSOLE_CREDENTIAL_SECONDS = min(
    60, int(os.environ.get("CORRAL_CONSOLE_CREDENTIAL_SECONDS", "20"))
)
CORRAL_TICK_SECONDS = float(os.environ.get("CORRAL_TICK_SECONDS", "1"))
CORRAL_TICKER_RUN_SECONDS = float(os.environ.get("CORRAL_TICKER_RUN_SECONDS", "15"))
CORRAL_JOB_HEARTBEAT_INTERVAL = float(os.environ.get("CORRAL_JOB_HEARTBEAT_INTERVAL", "2"))
CORRAL_JOB_HEARTBEAT_TIMEOUT = float(os.environ.get("CORRAL_JOB_HEARTBEAT_TIMEOUT", "20"))
CORRAL_TRANSITION_TIMEOUT = float(os.environ.get("CORRAL_TRANSITION_TIMEOUT", "120"))
# How long a guest may take to shut down when asked before it is powered off.
CORRAL_SHUTDOWN_TIMEOUT = float(os.environ.get("CORRAL_SHUTDOWN_TIMEOUT", "30"))
# The longest a job may run (hooks, placement, waits, a migration): the reaper fails it then.
CORRAL_JOB_MAX_SECONDS = float(os.environ.get("CORRAL_JOB_MAX_SECONDS", "900"))
CORRAL_JOB_DISPATCH_RETRY = float(os.environ.get("CORRAL_JOB_DISPATCH_RETRY", "30"))
CORRAL_EVENT_RETENTION_HOURS = float(os.environ.get("CORRAL_EVENT_RETENTION_HOURS", "24"))
# Finished jobs (and their journals) are deleted this long after they ended.
CORRAL_JOB_RETENTION_HOURS = float(os.environ.get("CORRAL_JOB_RETENTION_HOURS", "168"))
# How long one server-sent-events response of the portal lasts before the browser reconnects.
CORRAL_EVENT_STREAM_SECONDS = float(os.environ.get("CORRAL_EVENT_STREAM_SECONDS", "25"))
# Open event streams and waiting long polls one web process holds (past it: 503 with
# Retry-After), and of those, how many one user may hold (past it: 429). docs/production.md.
CORRAL_LIVE_WAITS_PER_PROCESS = int(os.environ.get("CORRAL_LIVE_WAITS_PER_PROCESS", "1000"))
CORRAL_LIVE_WAITS_PER_USER = int(os.environ.get("CORRAL_LIVE_WAITS_PER_USER", "30"))
CORRAL_HOOKS_DIR = Path(os.environ.get("CORRAL_HOOKS_DIR", BASE_DIR / "var" / "hooks"))
CORRAL_HOOK_TIMEOUT = float(os.environ.get("CORRAL_HOOK_TIMEOUT", "60"))
# /metrics answers a scraper sending "Authorization: Bearer <token>" (and system-wide admins).
CORRAL_METRICS_TOKEN = os.environ.get("CORRAL_METRICS_TOKEN", "")

# Scheduling: user-written policy units (dotted paths of PolicyUnitBase subclasses), the
# balancer's interval and cool-down, and how long a start waits for pending VMs to settle.
CORRAL_SCHEDULING_UNITS = env_list("CORRAL_SCHEDULING_UNITS", [])
CORRAL_BALANCE_INTERVAL = float(os.environ.get("CORRAL_BALANCE_INTERVAL", "60"))
CORRAL_BALANCE_COOLDOWN = float(os.environ.get("CORRAL_BALANCE_COOLDOWN", "600"))
# How long a host must have not responded before an admin may confirm it down (its highly
# available VMs then start elsewhere).
CORRAL_HOST_DOWN_GRACE = float(os.environ.get("CORRAL_HOST_DOWN_GRACE", "120"))
# A host Corral has not seen for this long (nothing synced it: Corral itself was stopped) was out
# of sight: when it is seen again, its running VMs found off or gone went down with it, not by
# anyone's hand (hosts/sync/unseen.py). Three sync intervals at least.
CORRAL_HOST_UNSEEN_AFTER = float(os.environ.get("CORRAL_HOST_UNSEEN_AFTER", "120"))
# How many hosts a start or a migration tries, the next-ranked after one that failed.
CORRAL_PLACEMENT_TRIES = int(os.environ.get("CORRAL_PLACEMENT_TRIES", "3"))
CORRAL_PENDING_WAIT = float(os.environ.get("CORRAL_PENDING_WAIT", "30"))
CORRAL_SCHEDULER_LOCK_TIMEOUT = float(os.environ.get("CORRAL_SCHEDULER_LOCK_TIMEOUT", "10"))
CORRAL_SCHEDULER_LOCK_HOLD_TIMEOUT = float(
    os.environ.get("CORRAL_SCHEDULER_LOCK_HOLD_TIMEOUT", "30")
)
# Seconds a user-written policy unit may take to answer; past it, it failed for that decision.
CORRAL_SCHEDULING_UNIT_TIMEOUT = float(os.environ.get("CORRAL_SCHEDULING_UNIT_TIMEOUT", "3"))

# Quotas: what one user may hold at once where no default quota row (hosts.Quota) sets it; an
# integer, or "unlimited". A user's limit is the most generous of their own, their groups' and
# this default (docs/architecture.md, "Quotas").
CORRAL_QUOTA_VMS = env_limit("CORRAL_QUOTA_VMS", "50")
CORRAL_QUOTA_VCPUS = env_limit("CORRAL_QUOTA_VCPUS", "100")
CORRAL_QUOTA_MEMORY_MB = env_limit("CORRAL_QUOTA_MEMORY_MB", "204800")
CORRAL_QUOTA_DISK_GB = env_limit("CORRAL_QUOTA_DISK_GB", "5000")
CORRAL_QUOTA_IMAGES = env_limit("CORRAL_QUOTA_IMAGES", "20")
CORRAL_QUOTA_IMAGE_GB = env_limit("CORRAL_QUOTA_IMAGE_GB", "500")
CORRAL_QUOTA_SNAPSHOTS = env_limit("CORRAL_QUOTA_SNAPSHOTS", "50")

# VM pools: the prestart monitor (oVirt's VmPoolMonitor settings).
VMPOOL_MONITOR_INTERVAL = float(os.environ.get("VMPOOL_MONITOR_INTERVAL", "60"))
VMPOOL_MONITOR_BATCH_SIZE = int(os.environ.get("VMPOOL_MONITOR_BATCH_SIZE", "5"))
VMPOOL_MONITOR_MAX_ATTEMPTS = int(os.environ.get("VMPOOL_MONITOR_MAX_ATTEMPTS", "3"))
# A burst of allocations queues one monitor nudge per pool per this many seconds.
VMPOOL_NUDGE_INTERVAL = float(os.environ.get("VMPOOL_NUDGE_INTERVAL", "5"))

# Leases: how long before its end a lease is warned, the longest lease, per-user quotas
# (0 = no limit) on what one user's live leases may hold at once, and how often leases short
# of capacity are repaired whatever change was missed (changes of hosts repair them at once).
LEASE_BEFORE_END_MINUTES = float(os.environ.get("LEASE_BEFORE_END_MINUTES", "60"))
LEASE_REPAIR_INTERVAL = float(os.environ.get("LEASE_REPAIR_INTERVAL", "60"))
LEASE_MAX_DURATION_DAYS = float(os.environ.get("LEASE_MAX_DURATION_DAYS", "31"))
LEASE_QUOTA_INSTANCES = int(os.environ.get("LEASE_QUOTA_INSTANCES", "0"))
LEASE_QUOTA_VCPUS = int(os.environ.get("LEASE_QUOTA_VCPUS", "0"))
LEASE_QUOTA_MEMORY_MB = int(os.environ.get("LEASE_QUOTA_MEMORY_MB", "0"))

# OpenStack clients (the minimal Keystone at /identity/v3 and the services it lists): the URL
# clients reach Corral at (default: the URL each request came to) and the catalog's region.
CORRAL_PUBLIC_URL = os.environ.get("CORRAL_PUBLIC_URL", "")
CORRAL_REGION = os.environ.get("CORRAL_REGION", "RegionOne")
