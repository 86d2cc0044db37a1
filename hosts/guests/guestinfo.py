"""The guest-info loop: what running guests show of themselves, copied from their hosts into
the database so that requests never ask a host.

Every CORRAL_GUEST_INFO_INTERVAL seconds, per Up host (run by the task cluster's syncer that
holds the host, ``hosts.sync.loop``, on threads of its own), one round of libvirt calls reads for
each of its VMs: the guest's addresses (from the QEMU guest agent where the VM has one, else
the DHCP leases of libvirt networks), the VNC port of its screen, and the tail of its serial
console log (the log file in the host's storage pool, downloaded through libvirt only when its
size changed, the last 64 KiB). Only what changed is written. A running guest whose SSH keys
are not those its holder should find there (a change made elsewhere) gets a job that puts them
there (``hosts.guests.keys``).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from hosts import driver
from hosts.guests import cloudinit, key_state
from hosts.models import ConsoleLog, Host, VirtualMachine
from hosts.signals import guest_keys_stale

logger = logging.getLogger(__name__)


def has_agent(vm: VirtualMachine) -> bool:
    """The template gives its VMs the guest agent's channel (hosts.operations.common.spec_for)."""
    return vm.template.guest_agent


def refresh_host(host_id: int) -> int:
    """Read and store what the guests on one host show; returns how many VMs changed."""
    host = Host.objects.filter(pk=host_id).first()
    if host is None:
        return 0
    vms = list(
        VirtualMachine.objects.filter(host=host)
        .select_related("template")
        .order_by("pk")[: settings.CORRAL_GUEST_INFO_MAX_VMS]
    )
    if not vms:
        return 0
    for vm in vms:
        if cloudinit.seed_is_stale(vm):
            _rewrite_seed(vm, host)
    known = dict(
        ConsoleLog.objects.filter(vm__in=vms).values_list("vm_id", "size"),
    )
    wanted = {str(vm.uuid): (has_agent(vm), known.get(vm.pk, -1)) for vm in vms}
    try:
        found = driver.guest_info(host.uri, wanted, host.storage_pool)
    except driver.DriverError as exc:
        logger.info("Guest info of %s not read: %s", host.name, exc.message)
        return 0
    changed = 0
    for vm in vms:
        info = found.get(str(vm.uuid))
        if info is not None and store(vm, info, known.get(vm.pk)):
            changed += 1
    behind = key_state.stale(vms)
    if behind:
        guest_keys_stale.send(sender=Host, vms=behind)
    return changed


def _rewrite_seed(vm: VirtualMachine, host: Host) -> None:
    """The VM changed hands: its seed gets its new user's keys (read at its next boot)."""
    vm.host = host
    try:
        cloudinit.write_seed(vm)
    except driver.DriverError as exc:
        logger.info("Seed of VM %s not rewritten: %s", vm.name, exc.message)


def store(vm: VirtualMachine, info: driver.GuestInfo, known_size: int | None) -> bool:
    """Write what changed of ``info`` for ``vm``; True if anything did."""
    fields = {}
    if vm.ip_addresses != info.addresses:
        fields["ip_addresses"] = info.addresses
    if vm.graphics_port != info.graphics_port:
        fields["graphics_port"] = info.graphics_port
    new_log = info.log_tail is not None and info.log_size != known_size
    if not fields and not new_log:
        return False
    with transaction.atomic():
        if fields:
            VirtualMachine.objects.filter(pk=vm.pk).update(**fields)
        if new_log:
            text = info.log_tail.decode("utf-8", errors="replace").replace("\0", "")
            ConsoleLog.objects.update_or_create(
                vm=vm, defaults={"text": text, "size": info.log_size or 0}
            )
    return True
