"""Light simulated hosts' URIs: a host name and a socket under the simulated hosts' folder,
nothing that could run a program or reach elsewhere; a refused one is never opened."""

import pytest
from django.conf import settings

from hosts import driver, sync
from hosts.driver.uris import refusal
from hosts.models import Host


def _socket(tail: str = "lightsim/sock") -> str:
    return f"{settings.CORRAL_SIMHOSTS_DIR}/{tail}"


def test_a_light_host_uri_with_its_socket_under_the_simulated_hosts_folder_is_accepted():
    assert refusal(f"lightsim+unix:///light-1?socket={_socket()}") is None


@pytest.mark.parametrize(
    "uri,reason",
    [
        ("lightsim+unix:///light-1?socket=/run/other/sock", "must lie under"),
        (f"lightsim+unix:///light-1?socket={_socket('a/../../../etc/sock')}", "'..'"),
        (f"lightsim+unix:///light-1?socket={_socket()}&command=/bin/sh", "nothing more"),
        (f"lightsim+ext:///light-1?socket={_socket()}", "nothing more"),
        (f"lightsim+unix://evil.example.org/light-1?socket={_socket()}", "nothing more"),
        (f"lightsim+unix:///-oProxy?socket={_socket()}", "not a light simulated host's name"),
        (f"lightsim+unix:///a/b?socket={_socket()}", "not a light simulated host's name"),
        ("lightsim+unix:///light-1?socket=relative/sock", "absolute path"),
        ("lightsim+unix:///light-1", "nothing more"),
    ],
)
def test_a_light_host_uri_reaching_beyond_its_socket_is_refused(uri, reason):
    assert reason in (refusal(uri) or "")


def test_a_refused_light_host_uri_in_the_database_puts_the_host_in_error_unopened(make_host):
    host = make_host(uri=f"lightsim+unix:///light-1?socket={_socket()}")
    Host.objects.filter(pk=host.pk).update(uri="lightsim+unix:///light-1?socket=/tmp/x/sock")

    with pytest.raises(driver.UriRefused):
        driver.host_report("lightsim+unix:///light-1?socket=/tmp/x/sock")
    assert sync.sync_host(host.pk).host_status == "error"
