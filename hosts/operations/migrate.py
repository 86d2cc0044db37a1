"""Live migration: the scheduler chooses the destination (a requested host, the balancer's
candidates, or any host but the current one); the VM may stay when its host is the best."""

from __future__ import annotations

import time

from django.db import transaction

from hosts import cloudinit, driver
from hosts.jobs import JobContext, JobFailed
from hosts.models import Host, VirtualMachine, VmStatus
from hosts.operations.common import (
    RUNNING,
    STOPPED,
    current_state,
    decided,
    host_call,
    refusal,
    run_event_hooks,
    set_status,
    wait_for,
)
from hosts.placement import NoHostAvailable, decision, place


def migrate(ctx: JobContext) -> dict:
    vm = ctx.refresh_vm()
    source = vm.host
    state = current_state(vm)
    if state not in RUNNING | {"paused"}:
        raise JobFailed("not_running", f"VM {vm.name} is not running, so it cannot migrate.")
    run_event_hooks(ctx, "vm-pre-migrate", 0.05)
    ctx.step("Choosing the destination", 0.15)
    started = time.monotonic()
    try:
        with decision(vm.cluster_id):
            chosen = _destinations(vm, ctx.job.params)
            destination = chosen.host
            if destination.pk == source.pk:
                decided(ctx, chosen.explanation, started, "stayed")
                ctx.log(f"The policy prefers {source.name}: the VM stays")
                return {"stayed": source.name, "placement": chosen.explanation}
            set_status(vm, VmStatus.MIGRATING, migrating_to=destination)
        decided(ctx, chosen.explanation, started, "placed")
    except NoHostAvailable as exc:
        decided(ctx, exc.explanation, started, refusal(exc))
        raise JobFailed("no_host", exc.message, {"placement": exc.explanation}) from exc
    ctx.step(f"Migrating from {source.name} to {destination.name}", 0.3)
    # Read-only CD-ROMs are not copied by a migration: the seed must be there first.
    host_call(cloudinit.write_seed_on, destination, vm)
    host_call(driver.migrate, source.uri, destination.uri, str(vm.uuid))
    ctx.step(f"Waiting for the VM to run on {destination.name}", 0.8)
    wait_for(ctx, destination, RUNNING | {"paused"}, STOPPED, "migrating")
    with transaction.atomic():
        VirtualMachine.objects.filter(pk=vm.pk).update(host=destination, migrating_to=None)
    vm.host = destination
    run_event_hooks(ctx, "vm-post-migrate", 0.9)
    return {"from": source.name, "to": destination.name, "placement": chosen.explanation}


def _destinations(vm: VirtualMachine, params: dict):
    """The scheduler's choice for a migration: a requested host, the balancer's candidates
    (the current host included, so staying is possible), or any host but the current one."""
    if params.get("host") is not None:
        destination = Host.objects.filter(pk=params["host"], cluster_id=vm.cluster_id).first()
        if destination is None:
            raise JobFailed("bad_destination", "The destination host is not in the VM's cluster.")
        if destination.pk == vm.host_id:
            raise JobFailed("bad_destination", f"VM {vm.name} is already on {destination.name}.")
        return place(vm, purpose="migrate", hosts=[destination])
    if params.get("candidates"):
        hosts = list(
            Host.objects.filter(
                pk__in=[*params["candidates"], vm.host_id], cluster_id=vm.cluster_id
            ).order_by("pk")
        )
        return place(vm, purpose="balance", hosts=hosts)
    return place(vm, purpose="migrate")
