"""Settings of the soak's web tier and task clusters: the production settings (DEBUG off, a
secret key from the environment), with the lab installed so that its light simulated hosts can
be reached (production refuses their URIs)."""

from project.settings import *  # noqa: F403
from project.settings import INSTALLED_APPS

if "lab" not in INSTALLED_APPS:
    INSTALLED_APPS = [*INSTALLED_APPS, "lab"]
