"""The real ``openstack`` CLI and Corral's quotas: a user's ``quota show --usage`` shows their
use going up after a server create, an admin raises their cores with ``quota set --cores``
(the CLI skips the volume and network quotas Corral's catalog has no service for), and a
server past the limit is refused in Nova's words, nothing made."""

from __future__ import annotations

import pytest

from hosts.models import Quota, VirtualMachine
from tests.openstack.conftest import as_json

pytestmark = pytest.mark.slow


def usage_of(rows: list[dict]) -> dict:
    return {row["Resource"]: (row["Limit"], row["In Use"]) for row in rows}


def test_quota_show_and_set_and_a_server_past_the_limit(
    sim_cluster, cloud, admin_user, make_user, make_template, make_image, grant
):
    Quota.objects.create(vcpus=2)  # everyone's default: one server of two cores
    alice = make_user("alice")
    grant(alice, "PowerUser", sim_cluster)
    image = make_image(name="deb")
    make_template(
        "m1.duo", cluster=sim_cluster, vcpus=2, memory_mb=128, disk_gb=1, disk_image=image
    )
    run, as_admin = cloud("alice"), cloud(admin_user.username)
    create = ("server", "create", "--flavor", "m1.duo", "--image", "deb", "--nic", "auto")

    as_json(run(*create, "-f", "json", "first"))
    after = usage_of(as_json(run("quota", "show", "--usage", "-f", "json")))
    as_admin("quota", "set", "--cores", "3", "alice")
    refused = run(*create, "second", ok=False)

    assert after["cores"] == (2, 2) and after["instances"][1] == 1
    assert after["ram"][1] == 128
    assert Quota.objects.get(user=alice).vcpus == 3
    assert refused.stderr.startswith("ForbiddenException: 403: ")
    assert refused.stderr.endswith(
        "Quota exceeded for cores: Requested 2, but already used 2 of 3 cores"
    )
    assert VirtualMachine.objects.filter(owner=alice).count() == 1
