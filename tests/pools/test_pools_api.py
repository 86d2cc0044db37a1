"""The VM pools API: creating a pool makes its VMs, counts, resizing, and deleting."""

import pytest
from django.contrib.auth import get_user_model

from hosts import jobs
from hosts.models import Job, JobKind, JobState, VirtualMachine, VmStatus
from pools.models import VmPool
from tests.conftest import unique
from tests.pools.fixtures import pool_vms

pytestmark = pytest.mark.django_db
User = get_user_model()
NO_AUTOMATIC_STOP = "prestarted VMs are not shut down automatically"


@pytest.fixture
def admin(admin_user, client_for):
    return client_for(admin_user)


@pytest.fixture
def cluster(make_cluster):
    return make_cluster()


@pytest.fixture
def template(make_template, cluster):
    return make_template(cluster=cluster, vcpus=1, memory_mb=128, disk_gb=1)


@pytest.fixture
def new_pool(cluster, template):
    """new_pool(**fields) -> the body of a POST /api/vmpools/ for this cluster."""

    def body(**fields) -> dict:
        return {
            "name": unique("lab"),
            "cluster": cluster.pk,
            "template": template.pk,
            "size": 3,
            "prestarted_vms": 1,
            **fields,
        }

    return body


def _create(admin, body: dict) -> dict:
    response = admin.post("/api/vmpools/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _names(pool_id: int) -> list[str]:
    return [vm.name for vm in pool_vms(VmPool.objects.get(pk=pool_id))]


def _counts(admin, pool) -> dict:
    response = admin.get(f"/api/vmpools/{pool.pk}/")
    assert response.status_code == 200, response.json()
    return response.json()["counts"]


def _own(vm, user) -> None:
    VirtualMachine.objects.filter(pk=vm.pk).update(owner=user)


# -- create ------------------------------------------------------------------------------------


def test_question_marks_in_the_name_pattern_become_the_vm_number_with_zeros(admin, new_pool):
    pool = _create(admin, new_pool(size=3, name_pattern="lab-???"))

    assert _names(pool["id"]) == ["lab-001", "lab-002", "lab-003"]


def test_a_plain_name_pattern_numbers_the_vms_after_a_dash(admin, new_pool):
    pool = _create(admin, new_pool(size=2, name_pattern="lab"))

    assert _names(pool["id"]) == ["lab-1", "lab-2"]


def test_without_a_name_pattern_vms_are_named_after_the_pool(admin, new_pool):
    pool = _create(admin, new_pool(name="physics", size=2))

    assert _names(pool["id"]) == ["physics-1", "physics-2"]


def test_each_vm_of_a_new_pool_has_a_prepare_job_queued(admin, new_pool):
    pool = _create(admin, new_pool(size=3))

    vms = pool_vms(VmPool.objects.get(pk=pool["id"]))
    prepared = Job.objects.filter(kind=JobKind.PREPARE, state=JobState.PENDING)
    assert sorted(prepared.values_list("vm_id", flat=True)) == sorted(vm.pk for vm in vms)
    assert all(vm.status == VmStatus.DOWN and vm.owner is None for vm in vms)


def test_a_new_pool_answers_with_its_counts(admin, new_pool):
    pool = _create(admin, new_pool(size=3, prestarted_vms=1))

    assert pool["counts"] == {
        "total": 3,
        "prestarted": 0,
        "running_unassigned": 0,
        "ready": 0,
        "takeable": 0,  # each VM is being prepared
        "assigned": 0,
        "starting": 0,
        "held": 0,
    }
    assert (pool["size"], pool["prestarted_vms"], pool["max_user_vms"]) == (3, 1, 1)


def test_more_prestarted_vms_than_the_size_is_a_400_on_prestarted_vms(admin, new_pool):
    response = admin.post("/api/vmpools/", new_pool(size=2, prestarted_vms=3), format="json")

    assert response.status_code == 400
    assert "At most the pool's size (2)" in response.json()["prestarted_vms"][0]
    assert (VmPool.objects.count(), VirtualMachine.objects.count()) == (0, 0)


def test_max_user_vms_below_one_is_a_400(admin, new_pool):
    response = admin.post("/api/vmpools/", new_pool(max_user_vms=0), format="json")

    assert response.status_code == 400
    assert "max_user_vms" in response.json()
    assert VmPool.objects.count() == 0


def test_too_few_question_marks_for_the_size_is_a_400_on_the_name_pattern(admin, new_pool):
    response = admin.post("/api/vmpools/", new_pool(size=10, name_pattern="lab-?"), format="json")

    assert response.status_code == 400
    assert "1 '?' digits number at most 9 VMs" in response.json()["name_pattern"][0]
    assert (VmPool.objects.count(), VirtualMachine.objects.count()) == (0, 0)


def test_a_template_of_another_cluster_is_a_400_on_the_template(
    admin, new_pool, make_cluster, make_template
):
    elsewhere = make_template(cluster=make_cluster())

    response = admin.post("/api/vmpools/", new_pool(template=elsewhere.pk), format="json")

    assert response.status_code == 400
    assert response.json()["template"] == ["This template belongs to another cluster."]
    assert VmPool.objects.count() == 0


def test_a_shared_template_may_make_a_pool_in_any_cluster(admin, new_pool, make_template):
    shared = make_template(cluster=None, memory_mb=128)

    pool = _create(admin, new_pool(template=shared.pk, size=1))

    assert pool["template"] == shared.pk


# -- counts ------------------------------------------------------------------------------------


def test_counts_tell_prestarted_running_assigned_starting_and_held_vms(admin, pool_of, make_user):
    pool = pool_of(up=3, down=3)
    up_free, up_held, up_taken, down_starting, down_free, down_taken = pool_vms(pool)
    VirtualMachine.objects.filter(pk=up_held.pk).update(admin_hold=True)
    _own(up_taken, make_user())
    _own(down_taken, make_user())
    jobs.submit(JobKind.START, vm=down_starting)

    counts = _counts(admin, pool)

    assert counts == {
        "total": 6,
        "prestarted": 2,  # up_free and down_starting
        "running_unassigned": 1,
        "ready": 1,  # up_free
        "takeable": 3,  # up_free, down_starting and down_free
        "assigned": 2,
        "starting": 1,
        "held": 1,
    }


def test_a_vm_whose_status_is_starting_counts_as_starting(admin, pool_of):
    pool = pool_of(down=2)
    VirtualMachine.objects.filter(pk=pool_vms(pool)[0].pk).update(status=VmStatus.STARTING)

    assert _counts(admin, pool)["starting"] == 1


def test_the_pool_list_takes_the_same_queries_for_one_pool_and_for_many(
    admin, pool_of, make_user, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    pool_of(up=1, down=1)
    with CaptureQueriesContext(connection) as one:
        assert admin.get("/api/vmpools/").status_code == 200
    owner = make_user()
    for _ in range(12):
        pool = pool_of(up=3, down=3)
        _own(pool_vms(pool)[0], owner)
        jobs.submit(JobKind.START, vm=pool_vms(pool)[-1])

    with django_assert_max_num_queries(len(one)):
        response = admin.get("/api/vmpools/", {"limit": 50})

    assert response.json()["count"] == 13


# -- grow and shrink ---------------------------------------------------------------------------


def test_growing_a_pool_adds_vms_with_the_next_numbers(admin, new_pool):
    pool = _create(admin, new_pool(size=2, name_pattern="lab-??"))

    response = admin.patch(f"/api/vmpools/{pool['id']}/", {"size": 4}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["counts"]["total"] == 4
    assert _names(pool["id"]) == ["lab-01", "lab-02", "lab-03", "lab-04"]
    added = VirtualMachine.objects.filter(name__in=["lab-03", "lab-04"])
    assert Job.objects.filter(kind=JobKind.PREPARE, vm__in=added).count() == 2


def test_shrinking_removes_unassigned_stopped_vms_before_running_ones(admin, pool_of, make_user):
    pool = pool_of(up=2, down=2)
    up_free, up_taken, down_one, down_two = pool_vms(pool)
    _own(up_taken, make_user())

    response = admin.patch(f"/api/vmpools/{pool.pk}/", {"size": 2}, format="json")

    assert response.status_code == 200, response.json()
    assert [vm.pk for vm in pool_vms(pool)] == [up_free.pk, up_taken.pk]
    assert not VirtualMachine.objects.filter(pk__in=[down_one.pk, down_two.pk]).exists()


def test_shrinking_past_the_stopped_vms_powers_off_an_unassigned_running_one(
    admin, pool_of, make_user
):
    pool = pool_of(up=2, down=1)
    up_free, up_taken, down = pool_vms(pool)
    _own(up_taken, make_user())

    response = admin.patch(f"/api/vmpools/{pool.pk}/", {"size": 1}, format="json")

    assert response.status_code == 200, response.json()
    assert [vm.pk for vm in pool_vms(pool)] == [up_taken.pk]
    queued = Job.objects.filter(vm=up_free, state=JobState.PENDING)
    assert list(queued.order_by("id").values_list("kind", flat=True)) == ["poweroff", "delete"]


def test_shrinking_that_would_remove_assigned_vms_is_a_409_and_changes_nothing(
    admin, pool_of, make_user
):
    pool = pool_of(up=2, down=1)
    first, second, down = pool_vms(pool)
    _own(first, make_user())
    _own(second, make_user())

    response = admin.patch(f"/api/vmpools/{pool.pk}/", {"size": 1}, format="json")

    assert response.status_code == 409
    assert "Cannot shrink" in response.json()["detail"]
    assert "assigned" in response.json()["detail"]
    pool.refresh_from_db()
    assert pool.size == 3
    assert [vm.pk for vm in pool_vms(pool)] == [first.pk, second.pk, down.pk]
    assert not Job.objects.exists()


def test_growing_right_after_a_shrink_skips_the_names_of_vms_still_being_removed(
    admin, pool_of, make_host
):
    pool = pool_of(down=5, name_pattern="lab-??")
    VirtualMachine.objects.filter(pool=pool).update(host=make_host(pool.cluster))

    shrunk = admin.patch(f"/api/vmpools/{pool.pk}/", {"size": 3}, format="json")
    grown = admin.patch(f"/api/vmpools/{pool.pk}/", {"size": 5}, format="json")

    assert shrunk.status_code == 200, shrunk.json()
    assert grown.status_code == 200, grown.json()
    assert grown.json()["counts"]["total"] == 5
    assert _names(pool.pk) == ["lab-01", "lab-02", "lab-03", "lab-06", "lab-07"]
    removing = VirtualMachine.objects.filter(pool=None).order_by("name")
    assert [vm.name for vm in removing] == ["lab-04", "lab-05"]
    assert set(Job.objects.filter(kind=JobKind.DELETE).values_list("vm__name", flat=True)) == {
        "lab-04",
        "lab-05",
    }


# -- prestarted VMs, fixed fields --------------------------------------------------------------


def test_lowering_prestarted_vms_warns_that_nothing_is_shut_down(admin, pool_of):
    pool = pool_of(up=3, prestarted_vms=3)

    response = admin.patch(f"/api/vmpools/{pool.pk}/", {"prestarted_vms": 1}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["warnings"] == [NO_AUTOMATIC_STOP]
    assert response.json()["prestarted_vms"] == 1
    assert [vm.status for vm in pool_vms(pool)] == ["up", "up", "up"]
    assert not Job.objects.exists()


def test_raising_prestarted_vms_answers_without_warnings(admin, pool_of):
    pool = pool_of(down=3, prestarted_vms=1)

    response = admin.patch(f"/api/vmpools/{pool.pk}/", {"prestarted_vms": 2}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["warnings"] == []


def test_cluster_and_template_cannot_change_after_create(
    admin, pool_of, make_cluster, make_template
):
    pool = pool_of(down=1)
    other_cluster = make_cluster()
    other_template = make_template(cluster=other_cluster)

    response = admin.patch(
        f"/api/vmpools/{pool.pk}/",
        {"cluster": other_cluster.pk, "template": other_template.pk},
        format="json",
    )

    assert response.status_code == 200, response.json()
    assert (response.json()["cluster"], response.json()["template"]) == (
        pool.cluster_id,
        pool.template_id,
    )
    pool.refresh_from_db()
    assert (pool.cluster_id, pool.template_id) != (other_cluster.pk, other_template.pk)


# -- delete ------------------------------------------------------------------------------------


def test_deleting_a_pool_whose_vms_users_hold_is_a_409_and_changes_nothing(
    admin, pool_of, make_user
):
    pool = pool_of(up=1, down=1)
    taken, free = pool_vms(pool)
    user = make_user()
    _own(taken, user)

    response = admin.delete(f"/api/vmpools/{pool.pk}/")

    assert response.status_code == 409
    assert "return them first, or delete with force" in response.json()["detail"]
    assert taken.name in response.json()["detail"]
    assert VmPool.objects.filter(pk=pool.pk).exists()
    assert VirtualMachine.objects.get(pk=taken.pk).owner == user
    assert len(pool_vms(pool)) == 2


def test_force_deleting_a_pool_takes_the_vms_from_their_users_and_removes_them(
    admin, pool_of, make_user, grant, client_for
):
    pool = pool_of(up=1, down=1)
    taken, free = pool_vms(pool)
    user = make_user()
    _own(taken, user)
    grant(user, "UserRole", taken)

    response = admin.delete(f"/api/vmpools/{pool.pk}/?force=true")

    assert response.status_code == 204
    assert not VmPool.objects.filter(pk=pool.pk).exists()
    assert not VirtualMachine.objects.filter(pk=free.pk).exists()
    queued = Job.objects.filter(vm=taken, state=JobState.PENDING).order_by("id")
    assert list(queued.values_list("kind", flat=True)) == ["poweroff", "delete"]
    assert client_for(user).get(f"/api/vms/{taken.pk}/").status_code == 404


def test_deleting_a_pool_nobody_uses_removes_it_and_its_stopped_vms(admin, pool_of):
    pool = pool_of(down=2)

    response = admin.delete(f"/api/vmpools/{pool.pk}/")

    assert response.status_code == 204
    assert not VmPool.objects.exists()
    assert not VirtualMachine.objects.exists()
