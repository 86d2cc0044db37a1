"""The libvirt driver against libvirt's in-process test hypervisor (test:///default)."""

import uuid

import pytest

from hosts import driver
from hosts.driver.libvirt import domains
from hosts.driver.libvirt.connection import connection
from hosts.driver.libvirt.events import LifecycleListener

URI = "test:///default"


@pytest.fixture
def spec():
    made = driver.DomainSpec(
        uuid=str(uuid.uuid4()),
        name=f"vm-{uuid.uuid4().hex[:8]}",
        vcpus=2,
        memory_mb=256,
        disk_gb=5,
        networks=("default",),
    )
    yield made
    driver.undefine(URI, made.uuid)


def test_define_creates_a_stopped_domain_with_the_vm_uuid(spec):
    driver.define(URI, spec)
    assert driver.domain_power_state(URI, spec.uuid) == "shutoff"


def test_domain_xml_carries_cpus_memory_and_networks(spec):
    xml = domains.domain_xml(spec, "TEST")
    assert f"<uuid>{spec.uuid}</uuid>" in xml
    assert "<memory unit='MiB'>256</memory>" in xml
    assert "<vcpu>2</vcpu>" in xml
    assert 'source network="default"' in xml
    assert '<domain type="test">' in xml


def test_domain_xml_escapes_names():
    spec = driver.DomainSpec(
        uuid=str(uuid.uuid4()), name="a<b>&c", vcpus=1, memory_mb=64, disk_gb=1
    )
    xml = domains.domain_xml(spec, "QEMU")
    assert "<name>a&lt;b&gt;&amp;c</name>" in xml
    assert '<domain type="kvm">' in xml


def test_power_operations_change_the_reported_state(spec):
    driver.define(URI, spec)
    driver.start(URI, spec.uuid)
    assert driver.domain_power_state(URI, spec.uuid) == "running"
    driver.suspend(URI, spec.uuid)
    assert driver.domain_power_state(URI, spec.uuid) == "paused"
    driver.resume(URI, spec.uuid)
    assert driver.domain_power_state(URI, spec.uuid) == "running"
    driver.shutdown(URI, spec.uuid)
    assert driver.domain_power_state(URI, spec.uuid) == "shutoff"
    driver.start(URI, spec.uuid)
    driver.power_off(URI, spec.uuid)
    assert driver.domain_power_state(URI, spec.uuid) == "shutoff"


def test_starting_a_running_domain_is_harmless(spec):
    driver.define(URI, spec)
    driver.start(URI, spec.uuid)
    driver.start(URI, spec.uuid)
    assert driver.domain_power_state(URI, spec.uuid) == "running"


def test_host_report_lists_every_domain_with_its_power_state_and_capacity(spec):
    driver.define(URI, spec)
    driver.start(URI, spec.uuid)
    report = driver.host_report(URI)
    assert report.cpus == 16 and report.memory_mb == 3072
    states = {d.uuid: d.power_state for d in report.domains}
    assert states[spec.uuid] == "running"


def test_snapshot_revert_restores_the_state_at_the_snapshot(spec):
    driver.define(URI, spec)
    driver.snapshot_create(URI, spec.uuid, "base")
    driver.start(URI, spec.uuid)
    driver.snapshot_revert(URI, spec.uuid, "base")
    assert driver.domain_power_state(URI, spec.uuid) == "shutoff"


def test_undefine_removes_a_running_domain_with_its_snapshots(spec):
    driver.define(URI, spec)
    driver.snapshot_create(URI, spec.uuid, "base")
    driver.start(URI, spec.uuid)
    driver.undefine(URI, spec.uuid)
    assert driver.domain_power_state(URI, spec.uuid) is None
    driver.undefine(URI, spec.uuid)  # gone already: nothing to do


def test_operations_on_a_missing_domain_raise_domain_not_found():
    with pytest.raises(driver.DomainNotFound):
        driver.start(URI, str(uuid.uuid4()))


def test_defining_a_second_domain_with_a_taken_name_is_refused(spec):
    driver.define(URI, spec)
    twin = driver.DomainSpec(
        uuid=str(uuid.uuid4()), name=spec.name, vcpus=1, memory_mb=64, disk_gb=1
    )
    with pytest.raises(driver.DriverError, match="another domain named"):
        driver.define(URI, twin)


def test_an_unreachable_host_says_so_in_words_and_keeps_its_uri_for_the_admins():
    uri = "test+unix:///default?socket=/nonexistent/libvirt-sock"
    with pytest.raises(driver.HostUnreachable) as raised:
        driver.host_report(uri)
    assert raised.value.message == "The host does not answer."
    assert raised.value.detail.startswith(f"{uri}: ")
    assert "/nonexistent/libvirt-sock" in raised.value.detail


def test_an_operation_the_host_cannot_do_says_what_in_words_and_libvirts_words_to_admins(spec):
    from hosts.driver.libvirt import guests

    driver.define(URI, spec)
    driver.start(URI, spec.uuid)
    with pytest.raises(driver.NotSupported) as raised:
        guests.set_authorized_keys(URI, spec.uuid, "debian", ["ssh-ed25519 AAAA k"])
    assert raised.value.message == "The host cannot put SSH keys in the guest's account debian."
    assert "virDomainAuthorizedSSHKeysSet" in raised.value.detail


def test_connections_are_reused_within_a_process():
    assert connection(URI) is connection(URI)


def test_lifecycle_events_reach_the_listener(spec):
    import threading

    seen = []
    arrived = threading.Event()

    def on_event(uri, domain_uuid, event):
        if domain_uuid == spec.uuid:
            seen.append(event)
            if event == "started":
                arrived.set()

    listener = LifecycleListener(on_event)
    try:
        assert listener.watch([URI]) == {}
        driver.define(URI, spec)
        driver.start(URI, spec.uuid)
        assert arrived.wait(5), seen
    finally:
        listener.close()
    assert "started" in seen
