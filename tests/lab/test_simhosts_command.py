"""manage.py simhosts: start N daemons and register them as Hosts; stop only those."""

import shutil
import tempfile
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from hosts import driver
from hosts.models import Host


@pytest.fixture
def simhosts_dir(settings):
    base = Path(tempfile.mkdtemp(prefix="corral-cmd-", dir="/tmp"))
    base.chmod(0o755)
    settings.CORRAL_SIMHOSTS_DIR = base
    yield base
    call_command("simhosts", "stop", stdout=StringIO())


def test_start_registers_reachable_hosts_in_the_cluster_and_is_idempotent(db, simhosts_dir):
    call_command("simhosts", "start", "2", "--cluster", "lab", stdout=StringIO())
    call_command("simhosts", "start", "2", "--cluster", "lab", stdout=StringIO())

    hosts = Host.objects.filter(cluster__name="lab").order_by("name")
    assert [h.name for h in hosts] == ["sim-1", "sim-2"]
    for host in hosts:
        assert host.uri.startswith("test+unix:///default?socket=")
        assert driver.host_report(host.uri).cpus == 16


def _spec(uuid: str, name: str) -> driver.DomainSpec:
    return driver.DomainSpec(uuid=uuid, name=name, vcpus=1, memory_mb=128, disk_gb=1)


def test_start_removes_what_an_earlier_database_left_and_keeps_what_is_owned(
    db, simhosts_dir, make_vm
):
    call_command("simhosts", "start", "1", stdout=StringIO())
    uri = Host.objects.get().uri
    owned = make_vm()
    driver.define(uri, _spec(str(owned.uuid), owned.domain))
    left = str(uuid.uuid4())
    driver.define(uri, _spec(left, f"corral-{left}"))
    driver.start(uri, left)
    before = {d.name for d in driver.host_report(uri).domains}

    out = StringIO()
    call_command("simhosts", "start", "1", stdout=out)

    after = {d.name for d in driver.host_report(uri).domains}
    # The test driver's own domain ("test") is not Corral's: it stays.
    assert before - after == {f"corral-{left}"}
    assert {owned.domain, "test"} <= after
    assert f"removed what no VM here owns, left by an earlier database: corral-{left}" in (
        out.getvalue()
    )


def test_stop_ends_the_daemons_it_started(db, simhosts_dir):
    call_command("simhosts", "start", "1", stdout=StringIO())
    uri = Host.objects.get().uri
    out = StringIO()
    call_command("simhosts", "stop", stdout=out)
    assert "stopped" in out.getvalue()
    with pytest.raises(driver.HostUnreachable):
        driver.host_report(uri)


@pytest.fixture
def light_dir(settings):
    """A folder for the light hosts' process under the simulated hosts' folder (the one the
    allowlist accepts light host sockets in)."""
    Path(settings.CORRAL_SIMHOSTS_DIR).mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="cmd-", dir=settings.CORRAL_SIMHOSTS_DIR))
    settings.CORRAL_SIMHOSTS_DIR = base
    yield base
    call_command("simhosts", "stop", stdout=StringIO())
    shutil.rmtree(base, ignore_errors=True)


def test_start_light_registers_hosts_of_one_process_with_their_vms_and_stop_ends_it(db, light_dir):
    args = ["simhosts", "start", "3", "--light", "--vms", "4", "--cluster", "lab"]
    call_command(*args, stdout=StringIO())
    call_command(*args, stdout=StringIO())

    hosts = list(Host.objects.filter(cluster__name="lab").order_by("name"))
    assert [h.name for h in hosts] == ["light-1", "light-2", "light-3"]
    reports = [driver.host_report(h.uri) for h in hosts]
    assert [len(r.domains) for r in reports] == [4, 4, 4]
    assert {d.power_state for r in reports for d in r.domains} == {"running"}

    call_command("simhosts", "light-change", "light-2", "lab-light-2-vm-3", "paused")
    states = {d.name: d.power_state for d in driver.host_report(hosts[1].uri).domains}
    assert states["lab-light-2-vm-3"] == "paused"

    out = StringIO()
    call_command("simhosts", "stop", stdout=out)
    assert "light hosts: stopped" in out.getvalue()
    with pytest.raises(driver.HostUnreachable):
        driver.host_report(hosts[0].uri)
