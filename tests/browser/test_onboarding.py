"""From nothing to a running VM, in the pages alone: an administrator logs in to the console,
creates a pool, grants a user access to it from the pool's own page; the user logs in to the
portal, sees the pool with a ready VM and takes it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from hosts.models import VirtualMachine, VmStatus
from pools.models import VmPool
from project.access.permissions import holds
from tests.browser.conftest import PASSWORD, VM_START_MS, log_in, wait_until_ready

pytestmark = pytest.mark.slow


def test_an_admin_creates_a_pool_and_grants_a_user_who_then_takes_a_running_vm(
    new_page, make_user, make_template, sim_cluster, running_tasks
):
    admin = make_user("operator", superuser=True)
    student = make_user("student")
    template = make_template("lab-small", memory_mb=128, vcpus=1, disk_gb=1, cluster=sim_cluster)
    tasks = running_tasks()

    console = new_page()
    console.goto("/admin/")
    console.get_by_label("Username").fill(admin.username)
    console.get_by_label("Password").fill(PASSWORD)
    console.get_by_role("button", name="Log in").click()

    console.goto("/admin/pools/vmpool/add/")
    console.locator("#id_name").fill("classroom")
    console.locator("#id_cluster").select_option(label=sim_cluster.name)
    console.locator("#id_template").select_option(label=str(template))
    console.locator("#id_size").fill("2")
    console.locator("#id_prestarted_vms").fill("1")
    console.locator('input[name="_continue"]').click()

    expect(console.locator("ul.messagelist")).to_contain_text("was added successfully")
    pool = VmPool.objects.get(name="classroom")
    assert VirtualMachine.objects.filter(pool=pool).count() == 2

    console.locator("#grant-access").click()
    expect(console.locator("#id_object")).to_have_value(f"pool:{pool.pk}")
    expect(console.locator(".field-object .select2-selection__rendered")).to_have_text(
        "VM pool: classroom"
    )
    console.locator("#id_user").select_option(label=student.username)
    console.locator("#id_role").select_option(label="User role")
    console.locator('input[name="_save"]').click()
    expect(console.locator("ul.messagelist")).to_contain_text("was added successfully")
    assert holds(student, "pools.allocate_vmpool", pool)

    wait_until_ready(pool, tasks)

    portal = new_page()
    log_in(portal, student)
    card = portal.locator(f'section.card.pool[data-pool="{pool.name}"]')
    expect(card.locator(".ready-count")).to_have_text("1", timeout=VM_START_MS)
    card.get_by_role("button", name="Take a VM").click()

    expect(portal).to_have_url(re.compile(r"/vms/\d+/$"))
    expect(portal.locator("#vm-status")).to_have_attribute("data-status", VmStatus.UP)
    taken = VirtualMachine.objects.get(pool=pool, owner=student)
    assert taken.status == VmStatus.UP
    expect(portal.get_by_role("heading", level=1)).to_have_text(f"VM {taken.name}")
