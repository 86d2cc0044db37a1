"""SSH keys in running guests: a VM's holder's keys reach its running guest at once, through the
QEMU guest agent, and leave it when the VM changes hands.

cloud-init reads the seed's keys only when a guest first boots, and a pool's prestarted VM
booted before anyone took it; so whenever the keys a guest should hold change (the VM is taken,
returned or given to someone else, it has started, its holder adds or deletes a key), a
``guest_keys`` job makes them the whole of the template's login account's
``~/.ssh/authorized_keys`` (libvirt's ``virDomainAuthorizedSSHKeysSet``): the template's own
keys and the holder's, nobody else's. The job waits a while for an agent that is not up yet
(a guest still booting). It succeeds only when the keys are in the guest: a guest without an
agent, or a host that cannot reach agents, fails it with the words the VM shows
(``guest_keys_note``, the VM page, the API's ``guest_keys``), and the guest then gets its
holder's keys from its seed at its next boot.

The guest-info loop (``hosts.guests.guestinfo``) catches any change made elsewhere: a running
VM whose guest holds other keys than it should, and with no job queued, gets a job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from hosts import driver, jobs
from hosts.error_codes import JobErrorCode
from hosts.guests import cloudinit
from hosts.guests.key_state import digest, pushes_keys, wanted_keys
from hosts.jobs import JobContext, JobFailed
from hosts.models import Job, JobKind, JobState, VirtualMachine, VmStatus
from hosts.sync import vm_changed

POLL_S = 0.5


def follow(vm: VirtualMachine, requested_by=None) -> Job | None:
    """Queue a ``guest_keys`` job for a running VM whose guest takes keys through its agent
    (coalesced into one already queued); None when there is nothing to do now."""
    if not pushes_keys(vm) or vm.status != VmStatus.UP or vm.host_id is None:
        return None
    return jobs.submit(JobKind.GUEST_KEYS, vm=vm, requested_by=requested_by)


def after_start(vm: VirtualMachine) -> Job | None:
    """Queue (after the start running now) the job that puts the keys in the started guest:
    its seed's keys may be stale (cloud-init reads them on an instance's first boot only)."""
    if not pushes_keys(vm):
        return None
    return jobs.submit(JobKind.GUEST_KEYS, vm=vm)


def supersede(vm: VirtualMachine, requested_by=None) -> Job | None:
    """The VM changed hands (a pool handed it out) while ``guest_keys`` jobs were queued or
    running for whoever held it before: the new holder's keys supersede theirs.

    A running job read the keys it puts before it waits for the agent (up to
    CORRAL_GUEST_KEYS_WAIT), so it is cancelled: it stops at its next look at the agent, and
    the new holder's job, queued after it, does not wait behind it. A queued job reads the
    holder when it runs: it is the new holder's job (``follow`` coalesces into it). Returns
    that job, or None when the VM does not run or takes keys only from its seed (its start
    queues one, ``after_start``). The caller holds the VM's row.
    """
    running = Job.objects.filter(vm=vm, kind=JobKind.GUEST_KEYS, state=JobState.RUNNING)
    holder = vm.owner.username if vm.owner_id else "nobody"
    for job in running:
        jobs.request_cancel(job, f"Superseded: VM {vm.name} is {holder}'s now; their keys follow")
    return follow(vm, requested_by=requested_by)


def follow_owner_of(user) -> list[Job]:
    """The user's keys changed: every running VM they hold gets them."""
    vms = VirtualMachine.objects.filter(owner=user, status=VmStatus.UP).select_related("template")
    return [job for vm in vms if (job := follow(vm)) is not None]


def _note(vm: VirtualMachine, note: str, **fields) -> None:
    VirtualMachine.objects.filter(pk=vm.pk).update(
        guest_keys_note=note[:500], guest_keys_at=timezone.now(), **fields
    )
    vm_changed(vm, f"VM {vm.name}: {note}" if note else f"VM {vm.name}: SSH keys in the guest")


@dataclass(frozen=True)
class _Words:
    """What a ``guest_keys`` job says: of its holder's keys (``holder``, a username), or, when
    nobody holds the VM, of the last holder's being taken out (the template's own stay)."""

    holder: str | None

    def step(self, account: str) -> str:
        if self.holder is None:
            return f"Taking the last holder's SSH keys out of the guest's account {account}"
        return f"Putting {self.holder}'s SSH keys in the guest's account {account}"

    @property
    def at_boot(self) -> str:
        if self.holder is None:
            return "the last holder's SSH keys may still be in the guest"
        return f"{self.holder}'s SSH keys reach the guest at its next boot"

    @property
    def unreached(self) -> str:
        if self.holder is None:
            return (
                "the last holder's SSH keys may still be in the guest; they are taken out "
                "once it answers"
            )
        return (
            f"{self.holder}'s SSH keys may not be in the guest; they are put there once it answers"
        )

    def refused(self, account: str) -> str:
        if self.holder is None:
            return f"The guest refused to have the last holder's SSH keys taken out of {account}."
        return f"The guest refused {self.holder}'s SSH keys: they are not in its account {account}."

    def done(self, count: int, account: str) -> str:
        if self.holder is None:
            return f"Only the template's SSH keys ({count}) left in {account}'s authorized_keys"
        return f"{count} SSH key(s) of {self.holder} in {account}'s authorized_keys"


def put_keys(ctx: JobContext) -> dict:
    """The ``guest_keys`` operation: the seed rewritten for the next boot, then the keys put in
    the running guest through its agent."""
    vm = ctx.refresh_vm()
    template = vm.template
    words = _Words(vm.owner.username if vm.owner_id else None)
    if vm.host is not None:
        ctx.step("Writing the cloud-init seed for the next boot", 0.1)
        try:
            cloudinit.write_seed(vm)
        except driver.DriverError as exc:
            ctx.log(f"The seed was not rewritten: {exc.message}", detail=exc.detail)
    if not template.login_user or not template.guest_agent:
        missing = "names no login account" if not template.login_user else "has no guest agent"
        note = (
            f"Template {template.name} {missing}: SSH keys reach the guest only through "
            "cloud-init's seed, at its next boot."
        )
        ctx.log(note)
        _note(vm, note)
        return {"in_guest": False}
    if vm.status != VmStatus.UP or vm.host is None:
        ctx.log("The VM is not running: its keys reach the guest when it starts.")
        return {"in_guest": False}
    keys = wanted_keys(vm)
    account = template.login_user
    ctx.step(words.step(account), 0.4)
    deadline = time.monotonic() + settings.CORRAL_GUEST_KEYS_WAIT
    while True:
        try:
            driver.set_authorized_keys(vm.host.uri, str(vm.uuid), account, keys)
            break
        except driver.GuestAgentUnavailable as exc:
            if time.monotonic() < deadline:
                ctx.check_cancelled()
                time.sleep(POLL_S)
                continue
            failure, wait = exc, settings.CORRAL_GUEST_KEYS_WAIT
            note = f"The guest agent did not answer within {wait:.0f} s: {words.at_boot}."
        except driver.NotSupported as exc:
            failure = exc
            note = f"Host {vm.host.name} cannot put SSH keys into running guests: {words.at_boot}."
        except driver.HostUnreachable as exc:
            note = f"Host {vm.host.name} did not answer: {words.unreached}."
            # No digest: the guest-info loop queues the keys again once the host answers.
            _note(vm, note, guest_keys_digest="", guest_keys_of=vm.owner_id)
            raise JobFailed(JobErrorCode.HOST_UNREACHABLE, note) from exc
        except driver.DriverError as exc:
            failure = exc
            note = words.refused(account)
        _note(vm, note, guest_keys_digest=digest(account, keys), guest_keys_of=vm.owner_id)
        # Failed, as the VM's keys say (the same note): they are not in the guest.
        raise JobFailed(failure.code, note, {"in_guest": False, "account": account}) from failure
    _note(vm, "", guest_keys_digest=digest(account, keys), guest_keys_of=vm.owner_id)
    ctx.log(words.done(len(keys), account))
    return {"in_guest": True, "account": account, "keys": len(keys)}
