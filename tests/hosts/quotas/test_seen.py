"""Where quotas are seen: GET /api/me/quota/ (each user their own), the portal's panel on My
VMs, and the admin console (only a system-wide grant sets limits; use per user and cluster)."""

import pytest

from hosts.models import Quota
from hosts.models.quotas import UNLIMITED
from tests.portal import signed_in
from tests.project.admin.fixtures import logged_in

pytestmark = pytest.mark.django_db


def test_my_quota_shows_each_limit_and_what_i_use(make_user, make_vm, client_for, settings):
    settings.CORRAL_QUOTA_IMAGES = None
    user = make_user()
    Quota.objects.create(user=user, vcpus=UNLIMITED)
    Quota.objects.create(vms=3, memory_mb=4096, disk_gb=50, image_gb=10)
    make_vm(owner=user, vcpus=2, memory_mb=1024, disk_gb=10)
    make_vm(owner=make_user(), vcpus=8)

    response = client_for(user).get("/api/me/quota/")

    assert response.status_code == 200
    assert response.json() == {
        "vms": {"limit": 3, "used": 1},
        "vcpus": {"limit": None, "used": 2},
        "memory_mb": {"limit": 4096, "used": 1024},
        "disk_gb": {"limit": 50, "used": 10},
        "images": {"limit": None, "used": 0},
        "image_gb": {"limit": 10, "used": 0},
        "snapshots": {"limit": 50, "used": 0},
        "leases": {"instances": None, "vcpus": None, "memory_mb": None},
    }


def test_my_quota_needs_a_caller(client_for):
    response = client_for(None).get("/api/me/quota/")
    assert response.status_code == 401
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_the_schema_describes_my_quota(client_for, admin_user):
    schema = client_for(admin_user).get("/api/schema/?format=json").json()

    answer = schema["paths"]["/api/me/quota/"]["get"]["responses"]["200"]
    assert answer["content"]["application/json"]["schema"]["$ref"].endswith("/MyQuota")
    line = schema["components"]["schemas"]["QuotaLine"]["properties"]
    assert line["limit"]["nullable"] is True


def test_my_vms_shows_a_bar_per_limited_resource(make_user, make_vm):
    user = make_user()
    Quota.objects.create(vms=4)
    make_vm(owner=user)

    page = signed_in(user).get("/vms/").content.decode()

    assert 'id="my-quota"' in page
    assert 'data-resource="vms"' in page
    assert '<meter min="0" max="4" value="1"' in page
    assert "1 of 4" in page


def test_admins_see_quotas_with_each_users_use(make_user, make_vm, admin_user):
    user = make_user("quota-holder")
    Quota.objects.create(user=user, vms=9)
    Quota.objects.create(vms=UNLIMITED)
    make_vm(owner=user, vcpus=2, memory_mb=512, disk_gb=5)

    page = logged_in(admin_user).get("/admin/hosts/quota/").content.decode()

    assert "Quota of user quota-holder" in page
    assert "1 VMs, 2 vCPUs, 512 MB, 5 GB" in page
    assert "Default quota" in page
    assert "unlimited" in page


def test_admins_set_a_limit_in_the_console(make_user, admin_user):
    user = make_user()

    response = logged_in(admin_user).post(
        "/admin/hosts/quota/add/", {"user": user.pk, "group": "", "vms": "12"}
    )

    assert response.status_code == 302
    assert Quota.objects.get(user=user).vms == 12


def test_only_a_system_wide_grant_reaches_quotas_in_the_console(make_user, make_cluster, grant):
    cluster_admin = make_user(is_staff=True)
    grant(cluster_admin, "ClusterAdmin", make_cluster())

    console = logged_in(cluster_admin)

    assert console.get("/admin/hosts/quota/").status_code == 403
    assert console.post("/admin/hosts/quota/add/", {"vms": "99"}).status_code == 403
    assert not Quota.objects.exists()


def test_users_cannot_set_their_quota_through_the_api(make_user, client_for):
    user = make_user()

    response = client_for(user).put("/api/me/quota/", {"vms": {"limit": 99}}, format="json")

    assert response.status_code == 405
    assert not Quota.objects.exists()


def test_the_cluster_list_totals_what_users_hold_in_each_cluster(
    make_user, make_vm, make_cluster, admin_user
):
    cluster = make_cluster("counted")
    make_vm(cluster=cluster, owner=make_user(), vcpus=2, memory_mb=1024, disk_gb=10)
    make_vm(cluster=cluster, owner=make_user(), vcpus=1, memory_mb=512, disk_gb=5)
    make_vm(cluster=cluster)  # nobody's: not counted

    page = logged_in(admin_user).get("/admin/hosts/cluster/").content.decode()

    assert "2 VMs, 3 vCPUs, 1536 MB, 15 GB" in page
