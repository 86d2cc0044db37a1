"""What the people using VMs read never shows the hosts' internals (a libvirt URI with its socket
path, libvirt's API names): the demo's flows on simulated hosts, and their failures, read in
every place a user reads them (the VM page and its refreshes, job progress, My VMs, the API's
VM, jobs and event feed, the terminal asked for). The host's own words stay for the admins:
the job's journal in the admin console."""

from __future__ import annotations

import pytest

from hosts.models import Host, Job, JobKind, JobState, VirtualMachine, VmStatus
from pools.models import PoolType
from tests.conftest import unique
from tests.pools.fixtures import run_queued_tasks
from tests.portal import signed_in

# A libvirt URI of a simulated host, its socket's path, libvirt's API call names.
INTERNALS = ("+unix://", "socket=", "virDomain")


def _what_the_user_reads(user, client_for, vms: list[VirtualMachine]) -> str:
    portal, api = signed_in(user), client_for(user)
    pages = [portal.get("/vms/"), portal.get("/vms/rows/"), api.get("/api/events/")]
    for vm in vms:
        pages += [
            portal.get(f"/vms/{vm.pk}/"),
            portal.get(f"/vms/{vm.pk}/panel/"),
            api.get(f"/api/vms/{vm.pk}/"),
            api.get("/api/jobs/", {"vm": vm.pk}),
        ]
        pages += [portal.get(f"/jobs/{job.pk}/") for job in Job.objects.filter(vm=vm)]
    for page in pages:
        assert page.status_code == 200, page
    # Asking for a terminal on these hosts is refused, in words.
    for vm in vms:
        pages += [
            portal.post(f"/vms/{vm.pk}/terminal/", follow=True),
            api.post(f"/api/vms/{vm.pk}/serial-console/"),
        ]
    return "\n".join(page.content.decode() for page in pages)


@pytest.fixture
def taken_on_sim(real_pool, pool_user):
    """A user holding a running VM of a pool on the simulated hosts, whose template puts SSH
    keys in the guest through its agent (the simulated hosts cannot), after the jobs ran."""
    pool = real_pool(size=1, prestarted_vms=1, type=PoolType.MANUAL)
    pool.template.login_user, pool.template.guest_agent = "debian", True
    pool.template.save()
    run_queued_tasks()
    user = pool_user(pool)
    signed_in(user).post(f"/pools/{pool.pk}/take/")
    run_queued_tasks()
    return user, VirtualMachine.objects.select_related("host").get(owner=user)


def test_what_users_read_of_vms_on_simulated_hosts_names_no_host_internals(
    taken_on_sim, make_vm, grant, client_for, admin_user
):
    user, vm = taken_on_sim
    portal = signed_in(user)
    portal.post(f"/vms/{vm.pk}/suspend/")
    portal.post(f"/vms/{vm.pk}/resume/")
    run_queued_tasks()
    # A VM of the user's whose host went away (its daemon's socket is gone): powering it off
    # fails on the host.
    gone = Host.objects.create(
        name=unique("gone"),
        cluster=vm.cluster,
        uri=f"test+unix:///default?socket=/tmp/{unique('corral-gone')}/libvirt-sock",
    )
    lost = make_vm(cluster=vm.cluster, template=vm.template, host=gone, status=VmStatus.UP)
    grant(user, "UserRole", lost)
    portal.post(f"/vms/{lost.pk}/poweroff/")
    run_queued_tasks()

    shown = _what_the_user_reads(user, client_for, [vm, lost])

    keys_job = Job.objects.filter(vm=vm, kind=JobKind.GUEST_KEYS).latest("id")
    power_off = Job.objects.get(vm=lost, kind=JobKind.POWEROFF)
    assert power_off.state == JobState.FAILED
    assert [job.state for job in Job.objects.filter(vm=vm, kind__in=["suspend", "resume"])] == [
        JobState.SUCCEEDED,
        JobState.SUCCEEDED,
    ]
    leaked = [internal for internal in INTERNALS if internal in shown]
    assert leaked == [], f"users read {leaked}"
    # What happened is said, in words for them:
    assert f"Host {vm.host.name} cannot put SSH keys into running guests" in shown
    assert "The host does not answer." in shown
    assert f"its host {vm.host.name} gives its guests no serial console" in shown
    # The admins read what the hosts said, in the journals of the jobs.
    admin = signed_in(admin_user)
    for job, said in ((keys_job, "virDomainAuthorizedSSHKeys"), (power_off, "socket=")):
        journal = admin.get(f"/admin/hosts/job/{job.pk}/change/").content.decode()
        assert said in journal, list(job.journal.values_list("message", "detail"))
