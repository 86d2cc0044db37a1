"""A simulated host stopped and started again keeps what a real host keeps across a restart
with libvirt-guests: its persistent domains, their snapshots, and its guests running (or
paused) as they were. One that was killed keeps nothing."""

import uuid

import pytest

from hosts import driver
from lab import simhosts


def _domains(daemon) -> dict[str, str]:
    """uuid -> power state of the host's domains, its own ``test`` domain left out."""
    report = driver.host_report(daemon.uri)
    return {d.uuid: d.power_state for d in report.domains if d.name != "test"}


@pytest.fixture
def three_guests(fragile_daemon) -> dict[str, str]:
    """A running, a paused and a shut-off domain, each with a snapshot taken while off."""
    states = {}
    for state in ("running", "paused", "shutoff"):
        spec = driver.DomainSpec(
            uuid=str(uuid.uuid4()), name=f"keep-{state}", vcpus=1, memory_mb=128, disk_gb=1
        )
        driver.define(fragile_daemon.uri, spec)
        driver.snapshot_create(fragile_daemon.uri, spec.uuid, "base")
        if state != "shutoff":
            driver.start(fragile_daemon.uri, spec.uuid)
        if state == "paused":
            driver.suspend(fragile_daemon.uri, spec.uuid)
        states[spec.uuid] = state
    assert _domains(fragile_daemon) == states
    return states


def test_a_stopped_simulated_host_keeps_its_domains_as_they_were(fragile_daemon, three_guests):
    simhosts.stop(fragile_daemon)
    assert fragile_daemon.pid() is None

    simhosts.start(fragile_daemon)

    assert _domains(fragile_daemon) == three_guests
    for uuid_ in three_guests:
        assert driver.has_snapshot(fragile_daemon.uri, uuid_, "base")
        driver.snapshot_revert(fragile_daemon.uri, uuid_, "base")
    assert set(_domains(fragile_daemon).values()) == {"shutoff"}


def test_a_killed_simulated_host_keeps_nothing(fragile_daemon, three_guests):
    simhosts.kill(fragile_daemon)

    simhosts.start(fragile_daemon)

    assert _domains(fragile_daemon) == {}
