"""Images in the admin console: seen with their copies on hosts, deleted unless a template
uses them, and only those of the clusters one administers."""

from __future__ import annotations

import pytest

from hosts.models import Image, ImageCopy
from tests.project.admin.fixtures import admin_url, run_action, shown_messages

pytestmark = pytest.mark.django_db


def test_an_image_page_shows_its_copy_on_each_host(
    superuser_console, make_image, make_host, cluster_a
):
    image = make_image(name="debian-12")
    host = make_host(cluster_a, name="kvm-7")
    ImageCopy.objects.create(image=image, host=host, state="failed", error="No room on kvm-7.")

    page = superuser_console.get(admin_url("hosts.image", "change", image.pk))

    assert page.status_code == 200
    assert "No room on kvm-7." in page.content.decode()


def test_a_cluster_admin_sees_only_the_images_of_their_cluster(
    console_of_a, make_image, cluster_a, cluster_b
):
    make_image(name="in-a", cluster=cluster_a)
    make_image(name="in-b", cluster=cluster_b)

    page = console_of_a.get(admin_url("hosts.image", "changelist")).content.decode()

    assert "in-a" in page
    assert "in-b" not in page


def test_deleting_an_image_a_template_uses_is_refused_with_a_message(
    superuser_console, make_image, make_template
):
    image = make_image(name="base")
    make_template(name="web", disk_image=image)

    response = run_action(superuser_console, "hosts.image", "delete_selected", [image], post="yes")

    assert Image.objects.filter(pk=image.pk).exists()
    shown = response.content.decode() + str(shown_messages(response))
    assert "web" in shown
