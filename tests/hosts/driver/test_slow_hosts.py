"""A host that is slow to let Corral in (an SSH login over a slow network, one that times out)
holds up the work on that host only: the other hosts' connections are handed out meanwhile,
and a task cluster's syncer renews its heartbeat (its lease on the hosts) on time.

The slow host here is a real socket that accepts libvirt's connection and never answers
(``qemu+tcp``), as a host whose network drops everything after the handshake would."""

import contextlib
import socket
import threading
import time

import pytest

from hosts import driver
from hosts.driver import LifecycleListener
from hosts.driver.libvirt import connection as connections
from hosts.models import Host
from hosts.sync import shard
from hosts.sync.loop import Syncer
from project.models import LoopLock
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class SilentHost:
    """A ``qemu+tcp`` URI whose listener accepts and never says a word; ``close`` ends it (the
    connections waiting on it then fail)."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.uri = f"qemu+tcp://127.0.0.1:{self.listener.getsockname()[1]}/system"
        self.accepted: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                peer = self.listener.accept()[0]
            except OSError:
                return
            self.accepted.append(peer)
            if self.closed:
                peer.close()

    def close(self) -> None:
        self.closed = True
        # shutdown wakes the accept() waiting on another thread; close alone would not.
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for peer in self.accepted:
            peer.close()


@pytest.fixture
def silent_host():
    host = SilentHost()
    yield host
    host.close()


def test_a_host_slow_to_open_does_not_hold_up_the_connections_to_the_others(silent_host, sim_hosts):
    opening = threading.Thread(target=_try_open, args=(silent_host.uri,), daemon=True)
    opening.start()
    wait_until(lambda: silent_host.accepted, timeout=10, message="libvirt did not connect")

    try:
        conn, took = _within(5, lambda: connections.connection(sim_hosts[0].uri))
        still_opening = opening.is_alive()
    finally:
        silent_host.close()

    assert conn.isAlive()
    assert took < 2.0, f"{took:.1f} s behind the silent host"
    assert still_opening  # the silent host's opening waited all along
    opening.join(timeout=30)
    assert not opening.is_alive()  # and failed once the host closed


def test_a_syncer_renews_its_heartbeat_while_a_held_hosts_connection_opens(
    silent_host, sim_cluster
):
    Host.objects.create(name="silent", cluster=sim_cluster, uri=silent_host.uri, status="up")
    syncer = Syncer("slow-host-test")
    listener = LifecycleListener(syncer.on_lifecycle_event)  # as its run() watches the hosts
    heartbeat = LoopLock.objects.filter(name=f"{shard.MEMBER}slow-host-test")
    try:
        _within(5, lambda: syncer.round(listener))
        held = set(Host.objects.filter(sync_owner="slow-host-test").values_list("name", flat=True))
        wait_until(lambda: silent_host.accepted, timeout=10, message="libvirt did not connect")
        first = heartbeat.get().expires_at
        syncer.last_claim = -1e9  # its heartbeat and claims are due again
        _, took = _within(5, lambda: syncer.round(listener))
        renewed = heartbeat.get().expires_at
    finally:
        silent_host.close()  # the sync and the watch waiting on it end
        syncer.stop(listener)
    assert "silent" in held
    assert took < 1.0, f"a round took {took:.1f} s behind the silent host"
    assert renewed > first


def _within(seconds: float, work):
    """``work()``'s result and how long it took, run on a thread of its own; fails when it
    takes longer than ``seconds`` (what it waits for is ended by the caller's cleanup)."""
    done = []

    def run() -> None:
        started = time.monotonic()
        done.append(work())
        done.append(time.monotonic() - started)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=seconds)
    assert len(done) == 2, f"still waiting after {seconds} s"
    return done[0], done[1]


def _try_open(uri: str) -> None:
    with contextlib.suppress(driver.DriverError):
        driver.host_report(uri)
