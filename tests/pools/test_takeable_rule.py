"""What a pool shows ready to take is what taking a VM takes: the portal's pool card, the API's
pool counts and the allocation read one rule (pools/takeable.py). Tried on every state a pool's
VM can be in (its status, who holds it, the jobs queued or running on it), both ways. A VM whose
only job puts SSH keys in its guest is ready: taking it supersedes that job."""

from __future__ import annotations

import re

import pytest

from hosts import driver, jobs, sync
from hosts.models import Job, JobKind, JobState, VmStatus
from hosts.operations import OPERATION_BY_KIND, spec_for
from pools.models import VmPool
from tests.pools.fixtures import add_pool_vms
from tests.portal import signed_in

pytestmark = pytest.mark.django_db

P, R, C = JobState.PENDING, JobState.RUNNING, JobState.CANCELLING
HOST_JOBS = {JobKind.COPY_IMAGE, JobKind.DELETE_IMAGE, JobKind.FAILOVER}

# The jobs on the VM, oldest first: none, each kind alone, and the sequences the job runner
# makes (a start then the keys it queues, keys then a start, a start then a shutdown…).
JOB_SETS = {
    "no job": [],
    "keys queued": [(JobKind.GUEST_KEYS, P)],
    "keys running": [(JobKind.GUEST_KEYS, R)],
    "keys cancelling": [(JobKind.GUEST_KEYS, C)],
    "start running": [(JobKind.START, R)],
    "start running, keys queued": [(JobKind.START, R), (JobKind.GUEST_KEYS, P)],
    "keys running, start queued": [(JobKind.GUEST_KEYS, R), (JobKind.START, P)],
    "keys running, keys queued": [(JobKind.GUEST_KEYS, R), (JobKind.GUEST_KEYS, P)],
    "start running, shutdown queued": [(JobKind.START, R), (JobKind.SHUTDOWN, P)],
    "keys running, shutdown queued": [(JobKind.GUEST_KEYS, R), (JobKind.SHUTDOWN, P)],
    "ended jobs": [
        (JobKind.START, JobState.SUCCEEDED),
        (JobKind.SHUTDOWN, JobState.FAILED),
        (JobKind.GUEST_KEYS, JobState.CANCELLED),
    ],
    **{
        f"{kind} queued": [(kind, P)]
        for kind in JobKind
        if kind not in HOST_JOBS and kind != JobKind.GUEST_KEYS
    },
}
HOLDERS = ("nobody", "a user", "an admin's hold")
# A VM someone holds is never taken, whatever its jobs: the sets that free VMs are taken with.
HELD_JOB_SETS = (
    "no job",
    "keys queued",
    "keys running",
    "start running",
    "start running, keys queued",
)
STATES = [
    (status, holder, job_set)
    for status in VmStatus
    for holder in HOLDERS
    for job_set in (JOB_SETS if holder == "nobody" else HELD_JOB_SETS)
]


def _pool_in(state, cluster, template, someone):
    """A pool of one VM in ``state`` (status, holder, jobs), named after it."""
    status, holder, job_set = state
    pool = VmPool.objects.create(
        name=f"s{STATES.index(state):03d}", cluster=cluster, template=template, size=1
    )
    [vm] = add_pool_vms(
        pool,
        [status],
        owner=someone if holder == "a user" else None,
        admin_hold=holder == "an admin's hold",
    )
    Job.objects.bulk_create(Job(kind=kind, vm=vm, state=state) for kind, state in JOB_SETS[job_set])
    return pool, vm


def _cards(page: str) -> dict[str, tuple[int, bool]]:
    """Each pool card's "ready now" figure, and whether its Take button is enabled, by pool."""
    cards = {}
    for card in page.split('<section class="card pool"')[1:]:
        name = re.search(r'data-pool="([^"]+)"', card).group(1)
        ready = re.search(r'<span class="figure ready-count">(\d+)</span> ready now', card)
        button = re.search(r"<button [^>]*>Take a VM</button>", card).group(0)
        cards[name] = (int(ready.group(1)), "disabled" not in button)
    return cards


def test_what_the_portal_and_the_api_show_ready_is_what_taking_a_vm_takes_in_every_state(
    make_cluster, pool_template, make_user, grant, client_for
):
    cluster, someone, user = make_cluster(), make_user(), make_user()
    grant(user, "UserRole", cluster)  # may take from every pool of the cluster
    pools = {state: _pool_in(state, cluster, pool_template, someone) for state in STATES}
    api = client_for(user)

    listed = api.get("/api/vmpools/", {"limit": 1000}).json()["results"]
    counts = {pool["name"]: pool["counts"] for pool in listed}
    cards = _cards(signed_in(user).get("/pools/cards/").content.decode())
    mismatches, takeable_states = [], []
    for state, (pool, vm) in pools.items():
        described = "{}, held by {}, {}".format(*state)
        shown = counts[pool.name]
        taken = api.post(f"/api/vmpools/{pool.pk}/allocatevm/")
        handed = taken.status_code == 200 and taken.json()["vm"]["id"] == vm.pk
        instant = handed and taken.json()["instant"]
        exhausted = {"detail": f"Pool {pool.name} has no free VM left; try again later."}
        if not handed and taken.json() != exhausted:
            mismatches.append(f"{described}: taking it answered {taken.content!r}")
        if (shown["takeable"], shown["ready"]) != (int(handed), int(instant)):
            mismatches.append(
                f"{described}: the API shows {shown['takeable']} takeable, {shown['ready']} "
                f"ready; taking it handed it out: {handed}, running at once: {instant}"
            )
        if cards[pool.name] != (shown["ready"], bool(shown["takeable"])):
            mismatches.append(f"{described}: the portal's card shows {cards[pool.name]}")
        if handed:
            takeable_states.append(described)

    assert mismatches == []
    # The rule itself, in the states users meet most.
    for expected in (
        "up, held by nobody, no job",
        "up, held by nobody, keys running",
        "up, held by nobody, keys queued",
        "down, held by nobody, no job",
        "down, held by nobody, start running",
        "starting, held by nobody, start running, keys queued",
    ):
        assert expected in takeable_states
    for refused in (
        "up, held by nobody, shutdown queued",
        "up, held by nobody, keys running, shutdown queued",
        "up, held by a user, no job",
        "up, held by an admin's hold, keys running",
        "paused, held by nobody, no job",
    ):
        assert refused not in takeable_states


# -- a VM whose guest is being given keys ------------------------------------------------------


@pytest.fixture
def keyed_pool(make_pool, make_host, make_template):
    """keyed_pool(status, *jobs) -> (pool, VM): a pool of one VM in ``status`` on a host, of a
    template whose running guests take SSH keys through their agent, with ``jobs`` ((kind,
    state), oldest first) on it: what a start's ``guest_keys`` job leaves while it waits."""

    def make(status: str, *on_it: tuple[str, str]):
        host = make_host()
        template = make_template(memory_mb=128, login_user="corral", guest_agent=True)
        pool = make_pool(cluster=host.cluster, template=template, size=1, prestarted_vms=1)
        [vm] = add_pool_vms(pool, [status], host=host)
        for kind, state in on_it:
            Job.objects.create(kind=kind, vm=vm, state=state)
        return pool, vm

    return make


def _jobs_on(vm) -> list[tuple[str, str, str | None]]:
    return [
        (job.kind, job.state, job.requested_by.username if job.requested_by else None)
        for job in Job.objects.filter(vm=vm).order_by("pk")
    ]


def test_a_running_vm_whose_keys_job_waits_for_its_agent_is_shown_ready_and_taken_at_once(
    keyed_pool, pool_user, client_for
):
    pool, vm = keyed_pool(VmStatus.UP, (JobKind.GUEST_KEYS, R))
    waiting = Job.objects.get(vm=vm)
    user = pool_user(pool)

    card = _cards(signed_in(user).get("/pools/cards/").content.decode())[pool.name]
    taken = client_for(user).post(f"/api/vmpools/{pool.pk}/allocatevm/")

    assert card == (1, True)
    assert taken.status_code == 200, taken.content
    assert (taken.json()["vm"]["id"], taken.json()["instant"]) == (vm.pk, True)
    # The job putting nobody's keys in stops at its next look at the agent; the new holder's
    # keys follow in a job of their own, next in the VM's queue.
    assert _jobs_on(vm) == [
        (JobKind.GUEST_KEYS, JobState.CANCELLING, None),
        (JobKind.GUEST_KEYS, JobState.PENDING, user.username),
    ]
    assert waiting.journal.last().message == (
        f"Superseded: VM {vm.name} is {user.username}'s now; their keys follow"
    )


def test_a_keys_job_still_queued_puts_the_new_holders_keys_in_when_it_runs(
    sim_hosts, make_template, make_pool, pool_user, client_for
):
    host = sim_hosts[0]
    template = make_template(memory_mb=128, disk_gb=1, login_user="corral", guest_agent=True)
    pool = make_pool(cluster=host.cluster, template=template, size=1, prestarted_vms=1)
    [vm] = add_pool_vms(pool, [VmStatus.DOWN], host=host)
    driver.define(host.uri, spec_for(vm))
    driver.start(host.uri, str(vm.uuid))
    sync.reconcile_vm(vm.pk)
    queued = jobs.submit(JobKind.GUEST_KEYS, vm=vm)  # as after its start: nobody's keys
    user = pool_user(pool)

    taken = client_for(user).post(f"/api/vmpools/{pool.pk}/allocatevm/")
    jobs.run(queued.pk, OPERATION_BY_KIND)

    assert taken.status_code == 200, taken.content
    assert (taken.json()["vm"]["id"], taken.json()["instant"]) == (vm.pk, True)
    # No second job. A simulated host cannot put keys into running guests, so the one job
    # fails saying so, for the holder it read when it ran.
    assert _jobs_on(vm) == [(JobKind.GUEST_KEYS, JobState.FAILED, None)]
    vm.refresh_from_db()
    assert vm.guest_keys_of == user.pk
    assert f"{user.username}'s SSH keys" in vm.guest_keys_note


def test_a_stopped_vm_left_with_a_waiting_keys_job_is_started_for_its_taker_not_behind_it(
    keyed_pool, pool_user, client_for
):
    pool, vm = keyed_pool(VmStatus.DOWN, (JobKind.GUEST_KEYS, R))
    user = pool_user(pool)

    taken = client_for(user).post(f"/api/vmpools/{pool.pk}/allocatevm/")

    assert taken.status_code == 200, taken.content
    body = taken.json()
    assert (body["vm"]["id"], body["instant"], body["job"]["kind"]) == (vm.pk, False, "start")
    assert _jobs_on(vm) == [
        (JobKind.GUEST_KEYS, JobState.CANCELLING, None),
        (JobKind.START, JobState.PENDING, user.username),
    ]
