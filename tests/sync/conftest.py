"""The simulated cluster and VM fixtures of the job tests, shared with the sync tests."""

from tests.jobs.conftest import (  # noqa: F401
    hooks_dir,
    job_in_thread,
    make_role,
    running_vm,
    sim_cluster,
    sim_hosts,
    sim_vm,
    small_template,
)
