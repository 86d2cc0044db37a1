"""manage.py simhosts: start N daemons and register them as Hosts; stop only those."""

import tempfile
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


def test_stop_ends_the_daemons_it_started(db, simhosts_dir):
    call_command("simhosts", "start", "1", stdout=StringIO())
    uri = Host.objects.get().uri
    out = StringIO()
    call_command("simhosts", "stop", stdout=out)
    assert "stopped" in out.getvalue()
    with pytest.raises(driver.HostUnreachable):
        driver.host_report(uri)
