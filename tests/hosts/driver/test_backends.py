"""One driver interface, two backends: libvirt serves every URI no other backend claimed, the
light simulator its own scheme; the allowlist is asked before either."""

import uuid

import pytest
from django.conf import settings

from hosts import driver
from hosts.driver import libvirt as libvirt_backend
from hosts.driver.libvirt.connection import connection
from lab.lightsim import driver as lightsim

URI = "test:///default"


def _light_uri() -> str:
    return f"lightsim+unix:///light-1?socket={settings.CORRAL_SIMHOSTS_DIR}/lightsim/sock"


@pytest.mark.parametrize("backend", [libvirt_backend, lightsim])
def test_each_backend_implements_every_call_of_the_interface(backend):
    assert isinstance(backend, driver.HostDriver)


def test_a_uri_is_served_by_the_backend_of_its_scheme():
    assert driver.backend_for(URI) is libvirt_backend
    assert driver.backend_for(_light_uri()) is lightsim


def test_a_refused_uri_reaches_no_backend():
    with pytest.raises(driver.UriRefused):
        driver.backend_for("lightsim+unix:///light-1?socket=/run/elsewhere/sock")


def test_libvirt_never_opens_a_uri_another_backend_serves():
    with pytest.raises(driver.NotSupported, match="served without libvirt"):
        connection(_light_uri())


def test_a_vm_does_not_move_between_hosts_of_two_backends_and_stays_where_it_was():
    spec = driver.DomainSpec(
        uuid=str(uuid.uuid4()),
        name=f"vm-{uuid.uuid4().hex[:8]}",
        vcpus=1,
        memory_mb=128,
        disk_gb=1,
    )
    driver.define(URI, spec)
    try:
        driver.start(URI, spec.uuid)
        with pytest.raises(driver.NotSupported, match="same kind"):
            driver.migrate(URI, _light_uri(), spec.uuid)
        assert driver.domain_power_state(URI, spec.uuid) == "running"
    finally:
        driver.undefine(URI, spec.uuid)
