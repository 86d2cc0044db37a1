"""Settings for the test suite: the real settings, with a throwaway secret key.

On SQLite the test database is a file (one per test run), so that task clusters started by
the tests in other processes can open it too.
"""

import os

os.environ.setdefault("SECRET_KEY", "corral-tests-only-not-secret")

from project.settings import *  # noqa: E402,F401,F403
from project.settings import DATABASES, INSTALLED_APPS, VAR_DIR  # noqa: E402

# The suite runs on the lab's hosts whatever DEBUG says.
if "lab" not in INSTALLED_APPS:
    INSTALLED_APPS = [*INSTALLED_APPS, "lab"]

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get("CORRAL_TEST_DB_NAME")
        or str(VAR_DIR / f"test-corral-{os.getpid()}.sqlite3")
    }

# Tests create many users; a fast hash keeps them quick (never use this outside tests).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The test client, the live server and the test web servers speak plain HTTP on the loopback:
# no redirect to HTTPS. tests/project/test_security_headers.py runs the production settings.
SECURE_SSL_REDIRECT = False
