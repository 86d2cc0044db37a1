"""The portal's ways to reach a guest: the Console button (noVNC on a one-time ticket), the
Terminal button (xterm.js on one), the serial console's tail and the guest's addresses on the
VM page; a host whose guests have no serial console offers no Terminal, and says why. The
relays themselves and the log's content on real QEMU:
tests/hosts/guests/test_guest_access.py and tests/hosts/guests/test_serial_terminal.py."""

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from hosts.models import ConsoleKind, ConsoleLog, ConsoleTicket, VirtualMachine
from tests.portal import messages_of, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def shown_vm(make_vm, make_host, make_user, grant):
    """A running VM whose screen and addresses the guest-info loop has read, and its user."""
    host = make_host(uri="qemu+unix:///session?socket=/tmp/cq-x/run/libvirt/libvirt-sock")
    vm = make_vm(cluster=host.cluster, host=host, status="up")
    VirtualMachine.objects.filter(pk=vm.pk).update(
        graphics_port=5901, ip_addresses=["10.0.2.15", "fec0::1"]
    )
    ConsoleLog.objects.create(vm=vm, text="corral-guest: booted\n", size=21)
    user = make_user()
    grant(user, "UserRole", vm)
    return vm, user


def test_the_vm_page_shows_addresses_a_console_button_and_the_serial_console(shown_vm):
    vm, user = shown_vm
    client = signed_in(user)

    page = client.get(f"/vms/{vm.pk}/").content.decode()
    log = client.get(f"/vms/{vm.pk}/console-log/").content.decode()

    assert "10.0.2.15, fec0::1" in page
    assert f'action="/vms/{vm.pk}/console/"' in page
    assert "corral-guest: booted" in log


def test_the_console_button_opens_novnc_on_a_fresh_ticket_for_its_user(shown_vm):
    vm, user = shown_vm

    response = signed_in(user).post(f"/vms/{vm.pk}/console/")

    page = response.content.decode()
    assert response.status_code == 200
    assert 'data-url="ws://testserver/ws/console/' in page
    assert "corral/console.js" in page
    assert response["Cache-Control"] == "no-store"
    ticket = ConsoleTicket.objects.get()
    assert (ticket.user_id, ticket.vm_id, ticket.used_at) == (user.pk, vm.pk, None)


def test_who_may_only_view_the_vm_gets_no_console_and_no_log(shown_vm, make_user, make_role, grant):
    vm, _ = shown_vm
    viewer = make_user()
    grant(viewer, make_role("Viewer", ["hosts.view_virtualmachine"]).name, vm)
    client = signed_in(viewer)

    page = client.get(f"/vms/{vm.pk}/").content.decode()

    assert "/console/" not in page and "console-log" not in page
    assert client.post(f"/vms/{vm.pk}/console/").status_code == 404
    assert client.get(f"/vms/{vm.pk}/console/").status_code == 404
    assert client.get(f"/vms/{vm.pk}/console-log/").status_code == 404
    assert not ConsoleTicket.objects.exists()


def test_the_consoles_address_opened_without_its_button_leads_to_the_vm_page_issuing_nothing(
    shown_vm, make_user
):
    vm, user = shown_vm

    response = signed_in(user).get(f"/vms/{vm.pk}/console/")
    stranger = signed_in(make_user()).get(f"/vms/{vm.pk}/console/")

    assert (response.status_code, response["Location"]) == (302, f"/vms/{vm.pk}/")
    assert stranger.status_code == 404
    assert not ConsoleTicket.objects.exists()


def test_a_stopped_vm_has_no_console_and_asking_says_why(shown_vm, client_for):
    vm, user = shown_vm
    VirtualMachine.objects.filter(pk=vm.pk).update(status="down")

    response = signed_in(user).post(f"/vms/{vm.pk}/console/", follow=True)
    api = client_for(user).post(f"/api/vms/{vm.pk}/console/")

    assert "opens while it runs" in response.content.decode()
    assert api.status_code == 409 and "opens while it runs" in api.json()["detail"]
    assert not ConsoleTicket.objects.exists()


def test_the_api_hands_out_a_ticket_valid_for_at_most_a_minute(shown_vm, client_for):
    vm, user = shown_vm

    response = client_for(user).post(f"/api/vms/{vm.pk}/console/")

    assert response.status_code == 201
    ticket = ConsoleTicket.objects.get()
    assert 0 < (ticket.expires_at - ticket.created_at).total_seconds() <= 60
    assert response.json()["url"].startswith("ws://testserver/ws/console/")
    assert ticket.digest not in response.json()["url"]  # only the digest is stored


def test_the_terminal_button_opens_xterm_on_a_fresh_serial_ticket_for_its_user(shown_vm):
    vm, user = shown_vm
    client = signed_in(user)
    assert f'action="/vms/{vm.pk}/terminal/"' in client.get(f"/vms/{vm.pk}/").content.decode()

    response = client.post(f"/vms/{vm.pk}/terminal/")

    page = response.content.decode()
    assert response.status_code == 200
    assert 'data-url="ws://testserver/ws/serial/' in page
    assert "corral/terminal.js" in page
    assert response["Cache-Control"] == "no-store"
    ticket = ConsoleTicket.objects.get()
    assert (ticket.user_id, ticket.vm_id, ticket.kind) == (user.pk, vm.pk, ConsoleKind.SERIAL)


def test_the_api_hands_out_a_serial_ticket_for_its_user(shown_vm, client_for):
    vm, user = shown_vm

    response = client_for(user).post(f"/api/vms/{vm.pk}/serial-console/")

    assert response.status_code == 201
    assert response.json()["url"].startswith("ws://testserver/ws/serial/")
    ticket = ConsoleTicket.objects.get()
    assert ticket.kind == ConsoleKind.SERIAL
    assert 0 < (ticket.expires_at - ticket.created_at).total_seconds() <= 60


def test_who_may_not_operate_the_vm_gets_no_terminal(shown_vm, make_user, make_role, grant):
    vm, _ = shown_vm
    viewer = make_user()
    grant(viewer, make_role("Viewer", ["hosts.view_virtualmachine"]).name, vm)
    stranger = make_user()

    page = signed_in(viewer).get(f"/vms/{vm.pk}/").content.decode()

    assert "/terminal/" not in page
    for user in (viewer, stranger):
        client = signed_in(user)
        assert client.post(f"/api/vms/{vm.pk}/serial-console/").status_code == 404
        assert client.post(f"/vms/{vm.pk}/terminal/").status_code == 404
        assert client.get(f"/vms/{vm.pk}/terminal/").status_code == 404
    assert not ConsoleTicket.objects.exists()


def test_the_terminals_address_opened_without_its_button_leads_to_the_vm_page(shown_vm):
    vm, user = shown_vm

    response = signed_in(user).get(f"/vms/{vm.pk}/terminal/")

    assert (response.status_code, response["Location"]) == (302, f"/vms/{vm.pk}/")
    assert not ConsoleTicket.objects.exists()


def test_a_stopped_vm_has_no_terminal_and_asking_says_why(shown_vm, client_for):
    vm, user = shown_vm
    VirtualMachine.objects.filter(pk=vm.pk).update(status="down")

    page = signed_in(user).get(f"/vms/{vm.pk}/").content.decode()
    response = signed_in(user).post(f"/vms/{vm.pk}/terminal/", follow=True)
    api = client_for(user).post(f"/api/vms/{vm.pk}/serial-console/")

    assert "/terminal/" not in page
    assert "its serial terminal opens while it runs" in response.content.decode()
    assert api.status_code == 409
    assert api.json()["detail"] == f"VM {vm.name} is down; its serial terminal opens while it runs."
    assert not ConsoleTicket.objects.exists()


def test_the_serial_log_without_scripts_shows_no_escape_sequences(shown_vm):
    vm, user = shown_vm
    text = "\x1b[6n\x1b[1;32mcorral-guest:\x1b[0m ready\r\n"
    ConsoleLog.objects.filter(vm=vm).update(text=text, size=len(text))

    log = signed_in(user).get(f"/vms/{vm.pk}/console-log/").content.decode()

    shown = log[log.index(">", log.index("<pre")) + 1 : log.index("</pre>")]
    assert shown == "corral-guest: ready\n"


# -- where no terminal can work ----------------------------------------------------------------


@pytest.fixture
def on_simulated_host(make_vm, make_host, make_user, grant):
    """A running VM on a simulated host (libvirt's test driver: no serial consoles), its user."""
    host = make_host(uri="test+unix:///default?socket=/tmp/corral-sim-x/sim-1/libvirt-sock")
    vm = make_vm(cluster=host.cluster, host=host, status="up")
    user = make_user()
    grant(user, "UserRole", vm)
    return vm, user


def test_a_vm_whose_host_has_no_serial_consoles_offers_no_terminal_and_says_why(
    on_simulated_host, client_for
):
    vm, user = on_simulated_host
    why = (
        f"VM {vm.name} has no terminal: its host {vm.host.name} gives its guests no serial "
        "console (simulated hosts have none)."
    )
    client = signed_in(user)

    page = client.get(f"/vms/{vm.pk}/").content.decode()
    asked = client.post(f"/vms/{vm.pk}/terminal/", follow=True)
    api = client_for(user).post(f"/api/vms/{vm.pk}/serial-console/")

    assert f'action="/vms/{vm.pk}/terminal/"' not in page
    assert f'<p id="vm-no-terminal" class="muted">{why}</p>' in page
    assert messages_of(asked) == [why]
    assert (api.status_code, api.json()["detail"]) == (409, why)
    assert not ConsoleTicket.objects.exists()


async def _closed_by_relay(path: str, cookie: str) -> tuple[bool, dict]:
    from project.asgi import application  # the whole web tier: loaded only where it is used

    headers = [(b"origin", b"http://testserver"), (b"cookie", cookie.encode())]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=15)
    closing = await communicator.receive_output(timeout=15) if connected else {}
    await communicator.disconnect()
    return connected, closing


@pytest.mark.django_db(transaction=True)
def test_a_terminal_whose_console_the_host_cannot_open_closes_saying_why_in_words(
    shown_vm, client_for
):
    vm, user = shown_vm  # its host's daemon (the socket in its URI) is not there
    browser = signed_in(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    url = client_for(user).post(f"/api/vms/{vm.pk}/serial-console/").json()["url"]

    connected, closing = async_to_sync(_closed_by_relay)(
        url.removeprefix("ws://testserver"), cookie
    )

    assert connected
    assert closing == {
        "type": "websocket.close",
        "code": 4502,
        "reason": "The host does not answer.",
    }
