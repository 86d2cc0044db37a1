"""The VM page says one thing of its holder's SSH keys: what the job that put them said. Taken
on a simulated host (which cannot put keys into running guests), the page shows the keys on
their way, then, live, not in the guest, in the very words of the job, which failed."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts.models import Template, VirtualMachine
from tests.browser.conftest import VM_START_MS, log_in, wait_until_ready

pytestmark = pytest.mark.slow


def test_the_vm_page_says_of_its_keys_what_the_job_that_put_them_says(
    page, sim_pool, pool_user, running_tasks
):
    pool = sim_pool(size=1, prestarted_vms=1)
    Template.objects.filter(pk=pool.template_id).update(login_user="debian", guest_agent=True)
    wait_until_ready(pool, running_tasks())
    user = pool_user(pool)
    log_in(page, user)

    page.locator(f'section.card.pool[data-pool="{pool.name}"]').get_by_role(
        "button", name="Take a VM"
    ).click()

    vm = VirtualMachine.objects.select_related("host").get(owner=user)
    keys = page.locator("#vm-guest-keys")
    expect(keys).to_have_attribute("data-state", "not_in_guest", timeout=VM_START_MS)
    said = (
        f"Host {vm.host.name} cannot put SSH keys into running guests: {user.username}'s SSH "
        "keys reach the guest at its next boot."
    )
    expect(keys).to_have_text(said)
    keys_job = page.locator("#vm-jobs .job").filter(has_text="Put its holder's SSH keys").first
    expect(keys_job).to_have_attribute("data-state", "failed")
    expect(keys_job.locator(".error")).to_have_text(said)
