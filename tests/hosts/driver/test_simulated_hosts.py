"""Simulated hosts: real libvirt daemons whose state every process shares."""

import subprocess
import sys
import uuid

import pytest

from hosts import driver
from lab import simhosts


@pytest.fixture
def spec():
    return driver.DomainSpec(
        uuid=str(uuid.uuid4()), name=f"vm-{uuid.uuid4().hex[:8]}", vcpus=1, memory_mb=128, disk_gb=1
    )


def test_a_domain_started_in_one_process_is_seen_running_by_another(sim_daemons, spec):
    host = sim_daemons[0]
    driver.define(host.uri, spec)
    driver.start(host.uri, spec.uuid)
    probe = (
        "from hosts import driver; from lab.testdriver import driver as testdriver; "
        "driver.register_libvirt_backend(testdriver.LIBVIRT_DRIVER, testdriver); "
        f"print(driver.domain_power_state({host.uri!r}, {spec.uuid!r}))"
    )
    other = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert other.stdout.strip() == "running"
    driver.undefine(host.uri, spec.uuid)


def test_hosts_do_not_share_domains(sim_daemons, spec):
    driver.define(sim_daemons[0].uri, spec)
    assert driver.domain_power_state(sim_daemons[1].uri, spec.uuid) is None
    driver.undefine(sim_daemons[0].uri, spec.uuid)


def test_emulated_migration_moves_a_running_domain_with_its_uuid_and_snapshots(sim_daemons, spec):
    source, destination = sim_daemons[0].uri, sim_daemons[1].uri
    driver.define(source, spec)
    driver.snapshot_create(source, spec.uuid, "base")
    driver.start(source, spec.uuid)

    driver.migrate(source, destination, spec.uuid)

    assert driver.domain_power_state(source, spec.uuid) is None
    assert driver.domain_power_state(destination, spec.uuid) == "running"
    driver.snapshot_revert(destination, spec.uuid, "base")
    assert driver.domain_power_state(destination, spec.uuid) == "shutoff"
    driver.undefine(destination, spec.uuid)


def test_a_killed_daemon_makes_its_host_unreachable_and_a_restart_reconnects(tmp_path):
    import tempfile
    from pathlib import Path

    base = Path(tempfile.mkdtemp(prefix="corral-kill-", dir="/tmp"))
    base.chmod(0o755)
    host = simhosts.SimHost(name="doomed", directory=base / "doomed")
    simhosts.start(host)
    try:
        assert driver.host_report(host.uri).cpus == 16
        simhosts.kill(host)
        with pytest.raises(driver.HostUnreachable):
            driver.host_report(host.uri)
        simhosts.start(host)
        assert driver.host_report(host.uri).cpus == 16
    finally:
        simhosts.stop(host)


def test_start_is_idempotent_and_stop_ends_only_the_daemon_it_started(sim_daemons):
    host = sim_daemons[2]
    pid = host.pid()
    assert simhosts.start(host) == pid
    assert sim_daemons[0].pid() is not None
