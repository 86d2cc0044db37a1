"""Fixtures for the portal tests: the pool, lease and role fixtures of the pool, lease and job
tests."""

from tests.jobs.conftest import make_role  # noqa: F401
from tests.leases.conftest import lease_user, make_lease  # noqa: F401
from tests.pools.conftest import pool_of, pool_template, pool_user  # noqa: F401
