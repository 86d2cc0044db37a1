"""Fixtures for the inventory tests: the simulated cluster and VMs of the job tests."""

from tests.jobs.conftest import sim_cluster, sim_hosts, sim_vm, small_template  # noqa: F401
