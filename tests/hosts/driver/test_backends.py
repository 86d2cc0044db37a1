"""One driver interface, three backends: libvirt serves every URI no other backend claimed, the
lab's variant of it libvirt's test driver, the light simulator its own scheme; the allowlist
is asked before any."""

import uuid

import pytest
from django.conf import settings

from hosts import driver
from hosts.driver import libvirt as libvirt_backend
from hosts.driver.libvirt.connection import connection
from lab.lightsim import driver as lightsim
from lab.testdriver import driver as testdriver

URI = "test:///default"


def _light_uri() -> str:
    return f"lightsim+unix:///light-1?socket={settings.CORRAL_SIMHOSTS_DIR}/lightsim/sock"


@pytest.mark.parametrize("backend", [libvirt_backend, testdriver, lightsim])
def test_each_backend_implements_every_call_of_the_interface(backend):
    assert isinstance(backend, driver.HostDriver)


def test_a_uri_is_served_by_the_backend_of_its_scheme():
    assert driver.backend_for("qemu:///system") is libvirt_backend
    assert driver.backend_for("qemu+ssh://root@host1/system") is libvirt_backend
    assert driver.backend_for(URI) is testdriver
    assert driver.backend_for("test+unix:///default?socket=/tmp/sock") is testdriver
    assert driver.backend_for(_light_uri()) is lightsim


def test_libvirt_opens_the_test_drivers_uris_and_the_lab_backend_makes_up_for_what_it_lacks():
    assert connection(URI).getType() == "TEST"
    assert driver.keeps_disks(URI) is False
    assert driver.has_serial_consoles(URI) is False
    assert driver.keeps_disks("qemu:///system") is True
    assert driver.has_serial_consoles("qemu:///system") is True


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
