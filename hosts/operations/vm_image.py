"""Making an image of a VM's disk (the job ``image_from_vm``, queued by
``hosts.vm_images.request_image``): a consistent copy, and the VM left as it was.

A running VM whose guest runs the agent is copied live: its QEMU copies the disk and its
filesystems are frozen through the agent only for the instant the copy is cut. A running VM
without an agent (or whose agent does not answer) is shut down for the copy and started again
after, on the same host; the journal says so. A stopped VM is copied as it is. The copy comes
back through the host driver as one standalone qcow2 (its backing chain flattened), is
checked as an upload is and becomes the image's file (``vm_images.keep``), with the template
an admin asked for with it.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.exceptions import ValidationError

from hosts import driver, vm_images
from hosts.error_codes import HostErrorCode, JobErrorCode
from hosts.guests import keys
from hosts.hooks import HookFailed, run_hooks
from hosts.jobs import JobContext, JobFailed, JobLost
from hosts.models import Host, Image, VirtualMachine, VmStatus
from hosts.operations import disks
from hosts.operations.common import (
    POLL_S,
    RUNNING,
    STOPPED,
    current_state,
    host_call,
    run_event_hooks,
    set_status,
)
from hosts.operations.power import shut_down_on
from project.errors import Refused

# Why the image was not kept, as the job says it (any other refusal: a copy that failed the
# format checks every image passes).
KEEP_REFUSALS = {
    HostErrorCode.QUOTA_EXCEEDED: JobErrorCode.QUOTA_EXCEEDED,
    JobErrorCode.IMAGE_DELETED: JobErrorCode.IMAGE_DELETED,
}


def image_from_vm(ctx: JobContext) -> dict:
    vm = ctx.refresh_vm()
    image = vm_images.saving(ctx.job.params.get("image"))
    if image is None:
        raise JobFailed(JobErrorCode.IMAGE_DELETED, "The image was deleted before it was made.")
    host, state = vm.host, current_state(vm)
    if host is None or state is None:
        raise JobFailed(
            JobErrorCode.NO_DISK,
            f"VM {vm.name} is on no host, so it has no disk to make an image of: start it once.",
        )
    if state == "paused":
        raise JobFailed(
            JobErrorCode.VM_PAUSED,
            f"VM {vm.name} is paused; resume it or shut it down, then make the image.",
        )
    copy = _Copy(ctx, vm, host, image)
    try:
        copy.make(running=state in RUNNING)
        ctx.step(f"Keeping image {image.name}", 0.8)
        try:
            image = vm_images.keep(image.pk, copy.path, copy.made)
        except Refused as exc:
            code = KEEP_REFUSALS.get(exc.code, JobErrorCode.BAD_COPY)
            raise JobFailed(code, exc.message) from exc
        ctx.log(f"Image {image.name} is ready ({image.size_bytes} bytes)")
    except JobLost:
        raise  # no longer this worker's job: the VM is not touched again
    except BaseException:
        copy.start_again(failing=True)
        raise
    finally:
        copy.path.unlink(missing_ok=True)
    copy.start_again()
    result = {
        "image": image.pk,
        "image_name": image.name,
        "size_bytes": image.size_bytes,
        "live": copy.live,
        "stopped_for_copy": copy.stopped_for_copy,
    }
    asked = ctx.job.params.get("template")
    if asked:
        result["template"] = _template(ctx, image, vm, asked)
    return result


class _Copy:
    """The copy of one VM's disk into the image store, and the VM's stop and start around it
    when it cannot be copied live."""

    def __init__(self, ctx: JobContext, vm: VirtualMachine, host: Host, image: Image):
        self.ctx, self.vm, self.host = ctx, vm, host
        self.path = vm_images.staging_path(image)
        self.made: driver.DiskCopy | None = None  # the copy, once made
        self.live = False
        self.stopped = False  # for the copy, and not started again yet
        self.stopped_for_copy = False

    def make(self, *, running: bool) -> None:
        ctx, vm, host = self.ctx, self.vm, self.host
        if running and vm.template.guest_agent:
            ctx.step(
                f"Copying the running VM's disk on {host.name}, its filesystems frozen through "
                "the guest agent while the copy is cut",
                0.2,
            )
            try:
                self._export(quiesce=True)
                self.live = True
                return
            except JobFailed as exc:
                if exc.code != JobErrorCode.GUEST_AGENT_UNAVAILABLE:
                    raise
                ctx.log(
                    "The guest agent did not answer: the VM is shut down for the copy and "
                    "started again after",
                    detail=exc.detail,
                )
        elif running:
            ctx.log(
                "The guest runs no agent to freeze its filesystems: the VM is shut down for the "
                "copy and started again after"
            )
        if running:
            self._stop()
        ctx.step(f"Copying the VM's disk on {host.name}", 0.5)
        self._export(quiesce=False)

    def _export(self, *, quiesce: bool) -> None:
        host = self.host
        self.made = host_call(
            lambda: driver.export_disk(
                host.uri,
                str(self.vm.uuid),
                host.storage_pool,
                disks.disk_name(self.vm),
                str(self.path),
                quiesce=quiesce,
                limit=settings.CORRAL_IMAGE_MAX_BYTES,
            )
        )

    def _stop(self) -> None:
        run_event_hooks(self.ctx, "vm-pre-stop", 0.25)
        set_status(self.vm, VmStatus.STOPPING)
        self.stopped = self.stopped_for_copy = True
        shut_down_on(self.ctx, self.vm, self.host, 0.3)
        run_event_hooks(self.ctx, "vm-post-stop", 0.45)

    def start_again(self, *, failing: bool = False) -> None:
        """Start the VM again on its host if the copy stopped it. While the job fails or is
        cancelled (``failing``) this still happens, journalled without steps (a step would stop
        at the cancellation), its hooks' failures and its own only journalled."""
        if not self.stopped:
            return
        self.stopped = False
        ctx, vm, host = self.ctx, self.vm, self.host
        try:
            self._hooks("vm-pre-start", 0.86, failing)
            set_status(vm, VmStatus.STARTING)
            if failing:
                ctx.log(f"Starting the VM again on {host.name}")
            else:
                ctx.step(f"Starting the VM again on {host.name}", 0.88)
            host_call(driver.start, host.uri, str(vm.uuid))
            _until_running(host, vm)
        except JobFailed as exc:
            if not failing:
                raise
            ctx.log(f"Starting the VM again failed: {exc.message}", detail=exc.detail)
            return
        if keys.after_start(vm) is not None:
            ctx.log("Its holder's SSH keys go into the guest next (a job of its own)")
        self._hooks("vm-post-start", 0.95, failing)

    def _hooks(self, event: str, progress: float, failing: bool) -> None:
        if not failing:
            run_event_hooks(self.ctx, event, progress)
            return
        vm = self.vm
        try:
            run_hooks(
                event, vm_uuid=str(vm.uuid), vm_id=vm.pk, reason="image_from_vm", log=self.ctx.log
            )
        except HookFailed as exc:
            self.ctx.log(exc.message)


def _until_running(host: Host, vm: VirtualMachine) -> None:
    """Wait for the VM to run again (a start it needs whatever became of the job: not
    cancellable), up to ``CORRAL_TRANSITION_TIMEOUT``."""
    deadline = time.monotonic() + settings.CORRAL_TRANSITION_TIMEOUT
    while (state := host_call(driver.domain_power_state, host.uri, str(vm.uuid))) not in RUNNING:
        if state in STOPPED or state is None or time.monotonic() > deadline:
            raise JobFailed(
                JobErrorCode.UNEXPECTED_STATE,
                f"The VM is {state or 'gone'} on {host.name} after it was started again.",
            )
        time.sleep(POLL_S)


def _template(ctx: JobContext, image: Image, vm: VirtualMachine, asked: dict) -> str:
    """The template asked for with the image; the image is kept whatever becomes of it."""
    ctx.step(f"Making template {asked.get('name')} of image {image.name}", 0.97)
    try:
        template = vm_images.make_template(image, vm, asked)
    except ValidationError as exc:
        words = "; ".join(
            f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
        )
        raise JobFailed(
            JobErrorCode.TEMPLATE_REFUSED,
            f"Image {image.name} was made, but not template {asked.get('name')}: {words}",
            {"image": image.pk, "image_name": image.name},
        ) from exc
    ctx.log(f"Template {template.name} boots image {image.name}")
    return template.name
