"""Where a VM's user logs in by SSH (the API's ``ssh``, the VM page, the admin), the NICs a
template asks for (a libvirt network, a host bridge, a user-mode NIC whose SSH port the host
publishes: on its loopback for a lab host, on its own address for a remote host), and the
``guest_keys`` jobs that put a holder's keys in a running guest, on simulated hosts (libvirt's
test driver, which has no guest agent). On real QEMU guests:
tests/hosts/guests/test_ssh_into_vm.py."""

import socket
from xml.etree import ElementTree

import pytest
from django.test import Client
from django.utils import timezone

from hosts import driver, jobs, sync
from hosts.driver.libvirt.domains import domain_xml, with_forwarded_ssh_port
from hosts.guests import guestinfo, ssh
from hosts.models import Host, Job, JobKind, JobState, VirtualMachine, VmStatus
from hosts.operations import OPERATION_BY_KIND, spec_for
from project.sshkeys import add_key
from tests.conftest import unique

pytestmark = pytest.mark.django_db
KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOF1aVOHEOdQlCYfNpJhu8ySnU6gLxo1GFtkFrel3xGI alice@laptop"
)
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
LOCAL = "qemu+unix:///session?socket=/tmp/cq-x/run/libvirt/libvirt-sock"


def _free_ports(count: int) -> int:
    """The first of ``count`` consecutive loopback ports nothing listens on now."""
    for first in range(41000, 42000, count):
        if all(ssh._free(port, Host(uri=LOCAL)) for port in range(first, first + count)):
            return first
    raise AssertionError("no free ports")


@pytest.fixture
def lab_host(make_host):
    first = _free_ports(2)
    return make_host(uri=LOCAL, guest_ssh_port_min=first, guest_ssh_port_max=first + 1)


def _running(make_vm, host, template, **fields) -> VirtualMachine:
    vm = make_vm(cluster=host.cluster, template=template, **fields)
    VirtualMachine.objects.filter(pk=vm.pk).update(host=host, status=VmStatus.UP)
    return VirtualMachine.objects.select_related("host", "template").get(pk=vm.pk)


def test_the_api_names_the_loopback_port_a_lab_host_publishes_the_guests_ssh_on(
    lab_host, make_vm, make_template, make_user, grant, client_for
):
    user = make_user()
    vm = _running(make_vm, lab_host, make_template(login_user="corral"), owner=user)
    VirtualMachine.objects.filter(pk=vm.pk).update(ssh_port=lab_host.guest_ssh_port_min)
    grant(user, "UserRole", vm)

    shown = client_for(user).get(f"/api/vms/{vm.pk}/").json()["ssh"]

    port = lab_host.guest_ssh_port_min
    assert shown == {
        "user": "corral",
        "host": "127.0.0.1",
        "port": port,
        "command": f"ssh -p {port} corral@127.0.0.1",
    }


def test_a_vm_on_a_bridge_is_reached_at_its_guests_own_address_on_port_22(
    make_host, make_vm, make_template
):
    host = make_host()
    vm = _running(make_vm, host, make_template(login_user="debian", bridge="br0"))
    VirtualMachine.objects.filter(pk=vm.pk).update(
        ip_addresses=["fe80::5054:ff:fe12:3456", "2001:db8::7", "192.168.122.50"]
    )
    vm.refresh_from_db()

    assert ssh.details(vm).as_dict() == {
        "user": "debian",
        "host": "192.168.122.50",
        "port": 22,
        "command": "ssh debian@192.168.122.50",
    }


@pytest.mark.parametrize(
    "case", ["user-mode NIC, nothing published", "no login account", "stopped", "no address yet"]
)
def test_no_ssh_is_offered_where_it_would_lead_nowhere(case, make_host, make_vm, make_template):
    host = make_host()
    template = make_template(
        login_user="" if case == "no login account" else "debian",
        networks=[] if case.startswith("user-mode") else ["default"],
    )
    vm = _running(make_vm, host, template)
    addresses = [] if case == "no address yet" else ["10.0.2.15"]
    status = VmStatus.DOWN if case == "stopped" else VmStatus.UP
    VirtualMachine.objects.filter(pk=vm.pk).update(ip_addresses=addresses, status=status)
    vm.refresh_from_db()

    assert ssh.details(vm) is None


def test_the_vm_page_shows_the_command_to_copy_and_whether_the_keys_are_in(
    lab_host, make_vm, make_template, make_user, grant, client_for
):
    user = make_user()
    vm = _running(
        make_vm, lab_host, make_template(login_user="corral", guest_agent=True), owner=user
    )
    VirtualMachine.objects.filter(pk=vm.pk).update(ssh_port=lab_host.guest_ssh_port_min)
    grant(user, "UserRole", vm)

    browser = Client()
    browser.force_login(user)
    answer = browser.get(f"/vms/{vm.pk}/")
    assert answer.status_code == 200, answer
    page = answer.content.decode()

    assert f"ssh -p {lab_host.guest_ssh_port_min} corral@127.0.0.1</code>" in page
    assert "Putting your SSH keys in the guest" in page


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"guest_ssh_port_min": 41000}, "guest_ssh_port_max", "both ends"),
        ({"guest_ssh_port_min": 41010, "guest_ssh_port_max": 41000}, "guest_ssh_port_max", "ends"),
        ({"guest_ssh_port_min": 41000, "guest_ssh_port_max": 42000}, "guest_ssh_port_max", "most"),
    ],
)
def test_a_guest_ssh_port_range_is_refused_when_it_cannot_work(
    fields, field, words, admin_user, client_for, make_cluster
):
    uri = LOCAL.replace("cq-x", "cq-y")
    answer = client_for(admin_user).post(
        "/api/hosts/",
        {"name": unique("h"), "cluster": make_cluster().pk, "uri": uri, **fields},
        format="json",
    )

    assert answer.status_code == 400
    assert words in " ".join(answer.json()[field])
    assert not VirtualMachine.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"), [("login_user", "Root User"), ("login_user", "x" * 33), ("bridge", "br 0")]
)
def test_a_template_refuses_an_account_or_bridge_name_no_system_has(
    field, value, admin_user, client_for
):
    answer = client_for(admin_user).post(
        "/api/templates/", {"name": unique("t"), field: value}, format="json"
    )

    assert answer.status_code == 400
    assert field in answer.json()


def test_the_domain_puts_nics_on_the_bridge_or_forwards_the_guests_ssh_port():
    bridged = ElementTree.fromstring(
        domain_xml(
            driver.DomainSpec(
                uuid="u", name="n", vcpus=1, memory_mb=128, disk_gb=1, bridge="br0", user_nic=True
            ),
            "QEMU",
        )
    )
    forwarded_xml = domain_xml(
        driver.DomainSpec(
            uuid="u",
            name="n",
            vcpus=1,
            memory_mb=128,
            disk_gb=1,
            user_nic=True,
            ssh_forward_port=2222,
        ),
        "QEMU",
    )
    forwarded = ElementTree.fromstring(forwarded_xml)

    assert [(i.get("type"), i.find("source").get("bridge")) for i in bridged.iter("interface")] == [
        ("bridge", "br0")
    ]
    assert forwarded.findall("devices/interface") == []
    args = [a.get("value") for a in forwarded.iter(f"{{{QEMU_NS}}}arg")]
    assert args[:2] == ["-netdev", "user,id=corralnet0,hostfwd=tcp:127.0.0.1:2222-:22"]
    moved = ElementTree.fromstring(with_forwarded_ssh_port(forwarded_xml, 2300))
    moved_args = [a.get("value") for a in moved.iter(f"{{{QEMU_NS}}}arg")]
    assert moved_args[1] == "user,id=corralnet0,hostfwd=tcp:127.0.0.1:2300-:22"
    # A remote destination publishes it on every address it has.
    remote = ElementTree.fromstring(with_forwarded_ssh_port(forwarded_xml, 2400, "0.0.0.0"))
    remote_args = [a.get("value") for a in remote.iter(f"{{{QEMU_NS}}}arg")]
    assert remote_args[1] == "user,id=corralnet0,hostfwd=tcp:0.0.0.0:2400-:22"


def test_a_remote_host_publishes_the_guests_ssh_on_its_own_address_and_the_api_names_it(
    admin_user, client_for, make_cluster, make_vm, make_template, make_user, grant
):
    made = client_for(admin_user).post(
        "/api/hosts/",
        {
            "name": unique("kvm"),
            "cluster": make_cluster().pk,
            "uri": "qemu+ssh://root@10.77.0.11/system",
            "guest_ssh_port_min": 41000,
            "guest_ssh_port_max": 41009,
        },
        format="json",
    )
    assert made.status_code == 201, made.content
    host = Host.objects.get(pk=made.json()["id"])
    user = make_user()
    vm = _running(make_vm, host, make_template(login_user="corral"), owner=user)
    grant(user, "UserRole", vm)
    # Not probed on Corral's machine: a port taken here says nothing of the host's.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        assert ssh._free(taken.getsockname()[1], host)

    port = ssh.claim_port(vm, host)

    assert port == 41000 and ssh.forward_listen_address(host) == "0.0.0.0"
    assert client_for(user).get(f"/api/vms/{vm.pk}/").json()["ssh"] == {
        "user": "corral",
        "host": "10.77.0.11",
        "port": 41000,
        "command": "ssh -p 41000 corral@10.77.0.11",
    }


def test_vms_starting_on_a_lab_host_take_different_ports_and_skip_one_in_use(
    lab_host, make_vm, make_template
):
    template = make_template(login_user="corral")
    first, second, third = (_running(make_vm, lab_host, template) for _ in range(3))
    low = lab_host.guest_ssh_port_min
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", low))
        taken.listen()
        assert ssh.claim_port(first, lab_host) == low + 1
    assert ssh.claim_port(second, lab_host) == low
    assert ssh.claim_port(third, lab_host) is None  # the range is used up
    assert set(
        VirtualMachine.objects.filter(pk__in=[first.pk, second.pk]).values_list(
            "ssh_port", flat=True
        )
    ) == {low, low + 1}


# -- keys through the guest agent, on hosts without one ------------------------------------------


@pytest.fixture
def held_on_sim(sim_hosts, make_vm, make_template, make_user, grant):
    """held_on_sim(**template) -> (user, VM) running on a simulated host, held by the user."""

    def make(**template_fields):
        user = make_user()
        template = make_template(memory_mb=128, vcpus=1, disk_gb=1, **template_fields)
        vm = make_vm(cluster=sim_hosts[0].cluster, template=template, owner=user)
        VirtualMachine.objects.filter(pk=vm.pk).update(host=sim_hosts[0])
        vm.refresh_from_db()
        driver.define(sim_hosts[0].uri, spec_for(vm))
        driver.start(sim_hosts[0].uri, str(vm.uuid))
        grant(user, "UserRole", vm)
        return user, sync.reconcile_vm(vm.pk)

    return make


def _keys_jobs(vm) -> list[Job]:
    return list(Job.objects.filter(vm=vm, kind=JobKind.GUEST_KEYS).order_by("pk"))


def test_a_host_without_guest_agents_fails_the_keys_job_with_the_words_the_vm_shows(
    held_on_sim, client_for
):
    user, vm = held_on_sim(login_user="debian", guest_agent=True)
    job = jobs.submit(JobKind.GUEST_KEYS, vm=vm)

    jobs.run(job.pk, OPERATION_BY_KIND)

    job.refresh_from_db()
    shown = client_for(user).get(f"/api/vms/{vm.pk}/").json()["guest_keys"]
    assert (job.state, job.error_code) == (JobState.FAILED, "not_supported")
    assert job.result == {"in_guest": False, "account": "debian"}
    assert shown == {
        "state": "not_in_guest",
        "message": f"Host {vm.host.name} cannot put SSH keys into running guests: "
        f"{user.username}'s SSH keys reach the guest at its next boot.",
    }
    assert job.error_message == shown["message"]
    page = Client()
    page.force_login(user)
    html = page.get(f"/vms/{vm.pk}/").content.decode()
    assert 'data-state="not_in_guest"' in html
    assert html.count(shown["message"].replace("'", "&#x27;")) == 2  # the keys, the job


def test_a_keys_job_for_a_vm_nobody_holds_says_it_takes_the_last_holders_keys_out(held_on_sim):
    _, vm = held_on_sim(login_user="debian", guest_agent=True)
    VirtualMachine.objects.filter(pk=vm.pk).update(owner=None)  # given back
    job = jobs.submit(JobKind.GUEST_KEYS, vm=vm)

    jobs.run(job.pk, OPERATION_BY_KIND)

    job.refresh_from_db()
    journal = list(job.journal.values_list("message", flat=True))
    assert "Taking the last holder's SSH keys out of the guest's account debian" in journal
    assert job.error_message == (
        f"Host {vm.host.name} cannot put SSH keys into running guests: the last holder's SSH "
        "keys may still be in the guest."
    )
    assert not any("nobody" in line for line in [*journal, job.error_message])


def _recorded_in_guest(vm) -> None:
    """As after a job that put its holder's keys in the guest."""
    VirtualMachine.objects.filter(pk=vm.pk).update(
        guest_keys_of=vm.owner_id, guest_keys_at=timezone.now(), guest_keys_note=""
    )


def test_while_a_keys_job_is_on_its_way_the_vm_says_its_keys_are_being_put_in(
    held_on_sim, client_for
):
    user, vm = held_on_sim(login_user="debian", guest_agent=True)
    _recorded_in_guest(vm)
    assert client_for(user).get(f"/api/vms/{vm.pk}/").json()["guest_keys"]["state"] == "in_guest"

    with_new_key = jobs.submit(JobKind.GUEST_KEYS, vm=vm)  # the holder added a key, say

    listed = client_for(user).get("/api/vms/").json()["results"]
    page = Client()
    page.force_login(user)
    html = page.get(f"/vms/{vm.pk}/").content.decode()
    assert with_new_key.state == JobState.PENDING
    assert [vm_["guest_keys"]["state"] for vm_ in listed] == ["pending"]
    assert 'data-state="pending"' in html and "Putting your SSH keys in the guest" in html


def test_a_keys_job_that_finds_the_host_gone_leaves_the_vm_saying_so_and_retried_later(
    held_on_sim, client_for
):
    user, vm = held_on_sim(login_user="debian", guest_agent=True)
    _recorded_in_guest(vm)
    # Its host stops answering (its daemon's socket is gone) as the job runs.
    there = vm.host
    Host.objects.filter(pk=there.pk).update(
        uri=f"test+unix:///default?socket=/tmp/{unique('gone')}/sock"
    )
    job = jobs.submit(JobKind.GUEST_KEYS, vm=vm)
    jobs.run(job.pk, OPERATION_BY_KIND)
    job.refresh_from_db()
    assert (job.state, job.error_code) == (JobState.FAILED, "host_unreachable")
    assert job.error_message.startswith(f"Host {there.name} did not answer")

    Host.objects.filter(pk=there.pk).update(uri=there.uri)  # it answers again
    sync.sync_host(there.pk)
    shown = client_for(user).get(f"/api/vms/{vm.pk}/").json()["guest_keys"]
    guestinfo.refresh_host(there.pk)

    assert shown == {"state": "not_in_guest", "message": job.error_message}
    assert [j.state for j in _keys_jobs(vm)] == [JobState.FAILED, JobState.PENDING]


def test_a_template_without_agent_or_account_says_keys_come_from_the_seed(held_on_sim, client_for):
    user, vm = held_on_sim(login_user="debian", guest_agent=False)

    shown = client_for(user).get(f"/api/vms/{vm.pk}/").json()["guest_keys"]

    assert shown["state"] == "at_boot"
    assert keys_follow(vm) is None  # nothing to push through


def keys_follow(vm):
    from hosts.guests import keys

    return keys.follow(vm)


def test_a_key_the_holder_adds_goes_to_the_running_vm_they_hold(
    held_on_sim, make_vm, django_capture_on_commit_callbacks
):
    user, vm = held_on_sim(login_user="debian", guest_agent=True)
    _, someone_elses = held_on_sim(login_user="debian", guest_agent=True)

    with django_capture_on_commit_callbacks(execute=True):
        add_key(user, "laptop", KEY)

    assert [job.state for job in _keys_jobs(vm)] == [JobState.PENDING]
    assert _keys_jobs(someone_elses) == []


def test_the_guest_info_loop_queues_keys_for_a_guest_holding_anothers_once(held_on_sim):
    _, vm = held_on_sim(login_user="debian", guest_agent=True)
    assert _keys_jobs(vm) == []

    guestinfo.refresh_host(vm.host_id)
    guestinfo.refresh_host(vm.host_id)  # the job is queued: not a second one

    [job] = _keys_jobs(vm)
    jobs.run(job.pk, OPERATION_BY_KIND)
    guestinfo.refresh_host(vm.host_id)  # tried for this holder and these keys: done
    assert len(_keys_jobs(vm)) == 1
