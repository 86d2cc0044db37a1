"""The admin console: the base every app's admin builds on (``base``: screens restricted to what
the caller may see) and project's own screens, registered on import: roles, grants, users, API
tokens and events. The site itself is project/admin_site.py."""

from project.admin import (  # noqa: F401  (each registers its screens)
    events,
    grants,
    roles,
    tokens,
    users,
)
