"""Corral's quotas through Nova's API: a server create over the caller's quota is Nova's 403
in Nova's words, nothing made (a min_count/max_count batch made up to what fits, or not at
all); ``/limits`` and ``os-quota-sets`` show the limits and the use; admins set and reset a
user's limits, others read only their own."""

from __future__ import annotations

import pytest

from hosts.models import Quota, VirtualMachine
from openstack.models import Server
from tests.openstack.conftest import nova_get

pytestmark = pytest.mark.django_db
V = "/compute/v2.1"
LATEST = {"HTTP_OPENSTACK_API_VERSION": "compute 2.37"}


@pytest.fixture
def launcher(sim_cluster, make_user, make_template, grant):
    """A PowerUser of the simulated cluster and a 2-vCPU flavor there."""
    user = make_user()
    grant(user, "PowerUser", sim_cluster)
    make_template("m1.small", cluster=sim_cluster, vcpus=2, memory_mb=128, disk_gb=1)
    return user


def create(client, **server):
    body = {"server": {"name": "node", "flavorRef": "m1.small", "networks": "auto", **server}}
    return client.post(f"{V}/servers", body, format="json", **LATEST)


def test_a_server_over_the_cores_quota_is_novas_403_and_nothing_is_made(launcher, nova_for):
    Quota.objects.create(vcpus=3)  # the default row: everyone's
    nova = nova_for(launcher)
    assert create(nova).status_code == 202

    refused = create(nova, name="second")

    assert refused.status_code == 403
    assert refused.json() == {
        "forbidden": {
            "code": 403,
            "message": "Quota exceeded for cores: Requested 2, but already used 2 of 3 cores",
        }
    }
    assert VirtualMachine.objects.filter(owner=launcher).count() == 1
    assert Server.objects.filter(owner=launcher).count() == 1


def test_instances_are_named_as_nova_names_them(launcher, nova_for):
    Quota.objects.create(vms=0)

    refused = create(nova_for(launcher))

    message = refused.json()["forbidden"]["message"]
    assert message == "Quota exceeded for instances: Requested 1, but already used 0 of 0 instances"


def test_a_batch_is_made_up_to_the_quota_and_refused_whole_below_min_count(launcher, nova_for):
    Quota.objects.create(vms=2)
    nova = nova_for(launcher)

    too_many = create(nova, min_count=3, max_count=3)
    made = create(nova, min_count=1, max_count=3)

    assert too_many.status_code == 403
    assert "Quota exceeded for instances" in too_many.json()["forbidden"]["message"]
    assert made.status_code == 202
    assert VirtualMachine.objects.filter(owner=launcher).count() == 2
    assert Server.objects.filter(owner=launcher).count() == 2


def test_limits_show_the_quota_and_the_use(launcher, nova_for):
    Quota.objects.create(vcpus=4)
    Quota.objects.create(user=launcher, vcpus=8, memory_mb=-1)  # more than the default
    nova = nova_for(launcher)
    create(nova)

    absolute = nova_get(nova, f"{V}/limits")["limits"]["absolute"]

    assert absolute["maxTotalCores"] == 8 and absolute["totalCoresUsed"] == 2
    assert absolute["maxTotalRAMSize"] == -1 and absolute["totalRAMUsed"] == 128
    assert (absolute["maxTotalInstances"], absolute["totalInstancesUsed"]) == (50, 1)


def test_a_user_reads_their_own_quota_set_with_its_use(launcher, nova_for):
    Quota.objects.create(vcpus=4)
    Quota.objects.create(user=launcher, vcpus=8)
    nova = nova_for(launcher)
    create(nova)

    shown = nova_get(nova, f"{V}/os-quota-sets/{launcher.pk}")["quota_set"]
    detail = nova_get(nova, f"{V}/os-quota-sets/{launcher.pk}/detail")["quota_set"]
    defaults = nova_get(nova, f"{V}/os-quota-sets/{launcher.pk}/defaults")["quota_set"]

    assert (shown["id"], shown["cores"], shown["instances"]) == (str(launcher.pk), 8, 50)
    assert shown["server_groups"] == -1 and shown["floating_ips"] == -1
    assert detail["cores"] == {"limit": 8, "in_use": 2, "reserved": 0}
    assert detail["ram"]["in_use"] == 128
    assert defaults["cores"] == 4


def test_network_quotas_leave_at_2_36(launcher, nova_for):
    shown = nova_for(launcher).get(f"{V}/os-quota-sets/{launcher.pk}", **LATEST).json()

    assert "floating_ips" not in shown["quota_set"] and "cores" in shown["quota_set"]


def test_another_projects_quota_is_refused_to_a_user(launcher, nova_for, make_user):
    other = make_user()
    nova = nova_for(launcher)

    read = nova.get(f"{V}/os-quota-sets/{other.pk}")
    detail = nova.get(f"{V}/os-quota-sets/{other.pk}/detail")

    assert (read.status_code, detail.status_code) == (403, 403)
    assert read.json()["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-quota-sets:show to be performed."
    )


def test_a_user_may_not_set_or_reset_even_their_own_quota(launcher, nova_for):
    nova = nova_for(launcher)
    path = f"{V}/os-quota-sets/{launcher.pk}"

    put = nova.put(path, {"quota_set": {"cores": 1000}}, format="json")
    delete = nova.delete(path)

    assert (put.status_code, delete.status_code) == (403, 403)
    assert not Quota.objects.filter(user=launcher).exists()


def test_an_admin_sets_and_resets_a_users_quota(launcher, nova_for, make_user, grant):
    admin = make_user()
    grant(admin, "SuperUser")
    Quota.objects.create(user=launcher, images=3)
    nova, path = nova_for(admin), f"{V}/os-quota-sets/{launcher.pk}"

    put = nova.put(path, {"quota_set": {"cores": 400, "ram": -1, "force": False}}, format="json")
    row = Quota.objects.get(user=launcher)
    reset = nova.delete(path)

    assert put.status_code == 200
    assert (put.json()["quota_set"]["cores"], put.json()["quota_set"]["ram"]) == (400, -1)
    assert (row.vcpus, row.memory_mb, row.images) == (400, -1, 3)
    assert reset.status_code == 202
    row.refresh_from_db()
    assert (row.vcpus, row.memory_mb, row.images) == (None, None, 3)


def test_a_limit_below_the_use_is_refused_unless_forced(launcher, nova_for, make_user, grant):
    Quota.objects.create(vcpus=0)
    Quota.objects.create(user=launcher, vcpus=4)
    admin = make_user()
    grant(admin, "SuperUser")
    create(nova_for(launcher))
    nova, path = nova_for(admin), f"{V}/os-quota-sets/{launcher.pk}"

    refused = nova.put(path, {"quota_set": {"cores": 1}}, format="json")
    forced = nova.put(path, {"quota_set": {"cores": 1, "force": True}}, format="json")

    assert refused.status_code == 400
    assert refused.json()["badRequest"]["message"] == (
        "Quota limit 1 for cores must be greater than or equal to already used and reserved 2."
    )
    assert forced.status_code == 200 and Quota.objects.get(user=launcher).vcpus == 1


def test_quotas_corral_does_not_set_per_project_are_a_400(launcher, nova_for, make_user, grant):
    admin = make_user()
    grant(admin, "SuperUser")
    path = f"{V}/os-quota-sets/{launcher.pk}"

    refused = nova_for(admin).put(path, {"quota_set": {"key_pairs": 5}}, format="json")
    unknown = nova_for(admin).put(path, {"quota_set": {"volumes": 5}}, format="json")

    assert (refused.status_code, unknown.status_code) == (400, 400)
    assert not Quota.objects.filter(user=launcher).exists()


def test_an_unknown_project_is_novas_400_for_an_admin(nova_for, make_user, grant):
    admin = make_user()
    grant(admin, "SuperUser")

    response = nova_for(admin).get(f"{V}/os-quota-sets/999999")

    assert response.status_code == 400
    assert response.json()["badRequest"]["message"] == "Project ID 999999 is not a valid project."


def test_an_admin_finds_a_users_project_by_name_or_id_in_keystone(blazar_for, make_user, grant):
    admin, user = make_user(), make_user()
    grant(admin, "SuperUser")
    keystone, theirs = blazar_for(admin), blazar_for(user)

    by_name = keystone.get(f"/identity/v3/projects?name={user.username}").json()["projects"]
    by_id = keystone.get(f"/identity/v3/projects/{user.pk}").json()["project"]
    hidden = theirs.get(f"/identity/v3/projects/{admin.pk}")
    unlisted = theirs.get(f"/identity/v3/projects?name={admin.username}")
    own_list = theirs.get(f"/identity/v3/projects?name={user.username}").json()["projects"]
    missing = keystone.get("/identity/v3/projects/999999")

    assert [p["id"] for p in by_name] == [str(user.pk)] and by_id["name"] == user.username
    assert hidden.status_code == 403
    assert unlisted.status_code == 403
    assert [p["id"] for p in own_list] == [str(user.pk)]
    assert missing.status_code == 404
