"""A libvirt error is a lost host only when the host no longer answers: libvirt reports a
failure on a host that answers well (QEMU refusing to start, a hung QEMU) with the same codes
as a dead connection, and a dead connection with codes of its own, so the driver asks the
connection before it says what happened. (Jobs failing so on real QEMU hosts:
tests/hosts/jobs/test_failures_on_reachable_hosts.py.)"""

import contextlib
import os
import signal
import uuid

import pytest

from hosts import driver
from lab import simhosts


def _spec(**fields) -> driver.DomainSpec:
    made = uuid.uuid4()
    return driver.DomainSpec(
        uuid=str(made), name=f"corral-{made}", vcpus=1, memory_mb=64, disk_gb=1, **fields
    )


@pytest.fixture
def defined():
    """defined(uri, spec) -> the spec, defined on the host; removed afterwards if it answers."""
    made = []

    def define(uri: str, spec: driver.DomainSpec) -> driver.DomainSpec:
        driver.define(uri, spec)
        made.append((uri, spec.uuid))
        return spec

    yield define
    for uri, domain in made:
        # One killed with its host is gone with it.
        with contextlib.suppress(driver.HostUnreachable):
            driver.undefine(uri, domain)


def test_a_start_that_fails_on_a_host_that_answers_says_so_in_libvirts_words(qemu_daemons, defined):
    host = qemu_daemons[0]
    missing = host.pool_directory / f"gone-{uuid.uuid4()}.qcow2"
    spec = defined(host.uri, _spec(disk_path=str(missing)))

    with pytest.raises(driver.DriverError) as raised:
        driver.start(host.uri, spec.uuid)

    assert not isinstance(raised.value, driver.HostUnreachable)
    assert raised.value.code == "driver_error"
    assert raised.value.message == "Could not start the VM: it failed on the host."
    assert "Cannot access storage file" in raised.value.detail
    assert str(missing) in raised.value.detail
    assert raised.value.detail.startswith(f"{host.uri}: ")
    # The host was never lost: it reports on, and the domain is still there, stopped.
    assert driver.domain_power_state(host.uri, spec.uuid) == "shutoff"


def test_a_host_whose_daemon_is_killed_under_a_connection_is_unreachable(fragile_daemon, defined):
    spec = defined(fragile_daemon.uri, _spec())
    assert driver.domain_power_state(fragile_daemon.uri, spec.uuid) == "shutoff"

    simhosts.kill(fragile_daemon)
    with pytest.raises(driver.HostUnreachable) as raised:
        driver.start(fragile_daemon.uri, spec.uuid)

    assert raised.value.reason == driver.HostProblem.UNREACHABLE
    assert raised.value.message in (
        "The host does not answer.",
        "Lost the connection to the host while trying to start the VM.",
    )
    assert raised.value.uri == fragile_daemon.uri


@pytest.mark.slow
def test_a_migration_to_a_host_that_froze_names_that_host_as_lost(
    sim_daemons, fragile_daemon, defined
):
    source = sim_daemons[0]
    spec = defined(source.uri, _spec())
    driver.start(source.uri, spec.uuid)
    assert driver.host_report(fragile_daemon.uri).cpus == 16  # the connection is open
    pid = fragile_daemon.pid()

    os.kill(pid, signal.SIGSTOP)  # a frozen host: its socket open, nothing answering
    try:
        with pytest.raises(driver.HostUnreachable) as raised:
            driver.migrate(source.uri, fragile_daemon.uri, spec.uuid)
    finally:
        os.kill(pid, signal.SIGCONT)

    assert raised.value.uri == fragile_daemon.uri
    assert raised.value.message == "Lost the connection to the other host while trying to " + (
        "migrate the VM."
    )
    # The source answered all along: the VM still runs there.
    assert driver.domain_power_state(source.uri, spec.uuid) == "running"
