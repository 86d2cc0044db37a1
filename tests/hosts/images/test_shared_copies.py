"""A new pool's images go once to each storage pool folder of its cluster: hosts set to share
storage hold one copy in their folder, so one of them gets the copy job; a folder holding a
copy already gets none. (The copy itself, made once and found by the other host:
``test_shared_storage.py``.)"""

from __future__ import annotations

import pytest

from hosts.models import CopyState, ImageCopy, Job, JobKind

pytestmark = pytest.mark.django_db


def test_a_new_pool_copies_its_image_once_per_pool_folder(
    make_cluster, make_host, make_template, make_image, admin_user, client_for
):
    cluster = make_cluster()
    up = {"status": "up", "domain_type": "qemu"}
    a, b = (make_host(cluster, shared_storage="nfs-1", **up) for _ in range(2))
    alone = make_host(cluster, **up)
    c, d = (make_host(cluster, shared_storage="nfs-2", **up) for _ in range(2))
    image = make_image()
    ImageCopy.objects.create(image=image, host=d, state=CopyState.READY, path="/nfs-2/x.raw")
    template = make_template(disk_image=image, disk_gb=1)

    response = client_for(admin_user).post(
        "/api/vmpools/",
        {"name": "pool", "cluster": cluster.pk, "template": template.pk, "size": 1},
        format="json",
    )

    assert response.status_code == 201, response.content
    copies = Job.objects.filter(kind=JobKind.COPY_IMAGE)
    assert sorted(copies.values_list("host__name", flat=True)) == sorted([a.name, alone.name])
    assert {b.pk, c.pk, d.pk}.isdisjoint(copies.values_list("host_id", flat=True))
