"""A user's effective limits: the most generous of their own quota, their groups' and the
default (the settings where no default row sets one); -1 is unlimited; superusers have none."""

import pytest
from django.contrib.auth.models import Group

from hosts import quotas
from hosts.models import Quota
from hosts.models.quotas import UNLIMITED

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def settings_defaults(settings):
    settings.CORRAL_QUOTA_VMS = 5
    settings.CORRAL_QUOTA_VCPUS = 10
    settings.CORRAL_QUOTA_MEMORY_MB = 8192
    settings.CORRAL_QUOTA_DISK_GB = 100
    settings.CORRAL_QUOTA_IMAGES = None
    settings.CORRAL_QUOTA_IMAGE_GB = 50
    settings.CORRAL_QUOTA_SNAPSHOTS = 7


def _group_of(user, name: str) -> Group:
    group = Group.objects.create(name=name)
    group.user_set.add(user)
    return group


def test_with_no_quota_rows_the_settings_are_everyones_limits(make_user):
    limits = quotas.effective_limits(make_user())

    assert limits == {
        "vms": 5,
        "vcpus": 10,
        "memory_mb": 8192,
        "disk_gb": 100,
        "images": None,
        "image_gb": 50,
        "snapshots": 7,
    }


def test_the_default_row_replaces_the_settings_where_it_sets_a_limit(make_user):
    Quota.objects.create(vms=2, vcpus=UNLIMITED)

    limits = quotas.effective_limits(make_user())

    assert (limits["vms"], limits["vcpus"], limits["memory_mb"]) == (2, None, 8192)


def test_a_users_own_quota_raises_their_limit_but_never_lowers_it_below_the_default(make_user):
    user = make_user()
    Quota.objects.create(user=user, vms=20, vcpus=4)

    limits = quotas.effective_limits(user)

    assert (limits["vms"], limits["vcpus"]) == (20, 10)


def test_the_most_generous_group_wins(make_user):
    user = make_user()
    Quota.objects.create(group=_group_of(user, "small"), vcpus=12)
    Quota.objects.create(group=_group_of(user, "large"), vcpus=40)
    Quota.objects.create(user=user, vcpus=16)

    assert quotas.effective_limits(user)["vcpus"] == 40


def test_unlimited_on_any_quota_that_applies_makes_the_user_unlimited(make_user):
    user = make_user()
    Quota.objects.create(group=_group_of(user, "staff"), memory_mb=UNLIMITED)
    Quota.objects.create(user=user, memory_mb=16384)

    assert quotas.effective_limits(user)["memory_mb"] is None


def test_other_users_and_groups_quotas_do_not_apply(make_user):
    user, other = make_user(), make_user()
    Quota.objects.create(user=other, vms=99)
    Quota.objects.create(group=_group_of(other, "theirs"), vms=98)

    assert quotas.effective_limits(user)["vms"] == 5


def test_superusers_have_no_limits(admin_user):
    Quota.objects.create(vms=1)

    assert quotas.effective_limits(admin_user) == dict.fromkeys(quotas.RESOURCE_NAMES)


def test_locking_reads_the_same_limits(make_user, django_assert_num_queries):
    user = make_user()
    Quota.objects.create(user=user, vms=7)

    with django_assert_num_queries(1):
        limits = quotas.lock_limits(user)

    assert limits == quotas.effective_limits(user)


def test_use_counts_the_vms_a_user_owns_pool_vms_they_hold_among_them(make_user, make_vm, pool_of):
    user = make_user()
    make_vm(owner=user, vcpus=2, memory_mb=1024, disk_gb=10)
    make_vm(owner=make_user(), vcpus=8, memory_mb=8192, disk_gb=80)
    pool = pool_of(up=2)
    held = pool.vms.first()
    held.owner = user
    held.save()

    used = quotas.usage(user)

    assert (used.vms, used.vcpus, used.memory_mb, used.disk_gb) == (
        2,
        2 + held.vcpus,
        1024 + held.memory_mb,
        10 + held.disk_gb,
    )
    assert (used.images, used.image_gb) == (0, 0)


def test_the_refusal_names_the_resource_the_limit_the_use_and_the_request(make_user, make_vm):
    user = make_user()
    make_vm(owner=user, vcpus=6)

    with pytest.raises(quotas.QuotaExceeded) as refused:
        quotas.charge(user, quotas.Resources(vms=1, vcpus=5))

    assert refused.value.code == "quota_exceeded"
    assert refused.value.message == (
        "Quota exceeded for vCPUs: requested 5, but already used 6 of 10."
    )
    assert (refused.value.resource, refused.value.limit, refused.value.used) == ("vcpus", 10, 6)


def test_memory_is_said_with_its_unit(make_user):
    with pytest.raises(
        quotas.QuotaExceeded, match=r"requested 9000 MB, but already used 0 of 8192 MB"
    ):
        quotas.charge(make_user(), quotas.Resources(vms=1, memory_mb=9000))


def test_a_request_within_every_limit_passes(make_user, make_vm):
    user = make_user()
    make_vm(owner=user, vcpus=6)

    quotas.charge(user, quotas.Resources(vms=1, vcpus=4))
