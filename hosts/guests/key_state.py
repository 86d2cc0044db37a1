"""Which SSH keys a running guest should hold, and which guests hold others: what both the
``guest_keys`` jobs (``hosts.guests.keys``) and the guest-info loop read. No jobs here: the loop
lies below the job runner."""

from __future__ import annotations

import hashlib
import json

import yaml

from hosts.models import VirtualMachine, VmStatus
from project.models import SshKey
from project.sshkeys import authorized_keys


def template_keys(vm: VirtualMachine) -> list[str]:
    """The keys the template's own user-data authorizes (they stay whoever holds the VM)."""
    document = yaml.safe_load(vm.template.user_data or "") or {}
    if not isinstance(document, dict):
        return []
    return [key for key in document.get("ssh_authorized_keys") or [] if isinstance(key, str)]


def wanted_keys(vm: VirtualMachine, owner_keys: list[str] | None = None) -> list[str]:
    """The template's keys, then the holder's (``owner_keys`` when the caller read them)."""
    keys = template_keys(vm)
    holder = owner_keys if owner_keys is not None else authorized_keys(vm.owner)
    return keys + [key for key in holder if key not in keys]


def digest(login_user: str, keys: list[str]) -> str:
    return hashlib.sha256(json.dumps([login_user, keys]).encode()).hexdigest()


def pushes_keys(vm: VirtualMachine) -> bool:
    """The VM's guest gets keys through its agent: its template names the account and gives
    it the agent's channel."""
    return bool(vm.template.login_user) and vm.template.guest_agent


def stale(vms: list[VirtualMachine]) -> list[VirtualMachine]:
    """Those of ``vms`` (with their templates) whose running guests hold other keys than they
    should: what the guest-info loop has jobs queued for (on those with no job yet)."""
    candidates = [
        vm for vm in vms if pushes_keys(vm) and vm.status == VmStatus.UP and vm.host_id is not None
    ]
    if not candidates:
        return []
    owners = {vm.owner_id for vm in candidates if vm.owner_id}
    keys_of: dict[int, list[str]] = {owner: [] for owner in owners}
    rows = SshKey.objects.filter(owner_id__in=owners).order_by("pk")
    for owner, key in rows.values_list("owner_id", "public_key"):
        keys_of[owner].append(key)
    return [
        vm
        for vm in candidates
        if vm.guest_keys_of != vm.owner_id
        or vm.guest_keys_digest
        != digest(vm.template.login_user, wanted_keys(vm, keys_of.get(vm.owner_id, [])))
    ]
