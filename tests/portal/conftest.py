"""Fixtures for the portal tests: the pool and role fixtures of the pool and job tests."""

from tests.jobs.conftest import make_role  # noqa: F401
from tests.pools.conftest import pool_of, pool_template, pool_user  # noqa: F401
