"""Who reads the hosts' own words behind a failure (libvirt's text: ``Job.error_detail``, a
journal line's ``detail``): those who may see the hosts of the cluster it happened in. The
people using a VM read the job's message alone, which says what failed in words."""

from __future__ import annotations

from hosts.models import Cluster, Host, Job
from project.access.permissions import holds, restrict

VIEW_HOST = "hosts.view_host"


def reads_host_words(user, cluster: Cluster | None) -> bool:
    """Whether ``user`` may read the hosts' own words about what happens in ``cluster``."""
    return cluster is not None and holds(user, VIEW_HOST, cluster)


def reads_job_host_words(user, job: Job) -> bool:
    """Whether ``user`` may read the hosts' words behind ``job``'s failure (False when it has
    none: no query then)."""
    if not job.error_detail:
        return False
    cluster = job.vm.cluster if job.vm_id else (job.host.cluster if job.host_id else None)
    return reads_host_words(user, cluster)


def clusters_read_by(user) -> set[int]:
    """The clusters whose hosts' words ``user`` may read, in one query (for a list of jobs)."""
    hosts = restrict(Host.objects.all(), user, VIEW_HOST)
    return set(hosts.values_list("cluster_id", flat=True).distinct())


def job_cluster_id(job: Job) -> int | None:
    """The cluster a job happened in: its VM's, or its host's (None once both are gone)."""
    if job.vm_id is not None:
        return job.vm.cluster_id
    if job.host_id is not None:
        return job.host.cluster_id
    return None
