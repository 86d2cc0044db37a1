"""What the soak's fleet holds before its users arrive: simulated hosts in two clusters, pools
kept prestarted, hosts reservable for leases, and the users with their API tokens."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from hosts.models import Cluster, Host, Template
from hosts.sync import sync_host
from lab import simhosts
from lab.lightsim import driver as lightsim
from pools.models import PoolType, VmPool
from pools.services import create_pool
from project.access import tokens as api_tokens
from project.access.grants import grant_role, scope_object
from project.models import Role

SIM_HOSTS = 6  # libvirt daemons serving the test driver
RESERVABLE_HOSTS = 2
LIGHT_DOMAINS = 5


@dataclass
class Fleet:
    """What the load and the faults act on (ids and URIs, no ORM objects: threads share it)."""

    daemons: list[simhosts.SimHost]  # the libvirt daemons (test driver), in Host order
    light: simhosts.LightServer
    light_uris: list[str]
    pools: list[int]  # pool ids the users take VMs from
    template: int
    cluster_ids: list[int]  # the libvirt hosts' cluster first
    policies: list[int]
    users: dict[int, str] = field(default_factory=dict)  # user id -> token
    admins: dict[int, str] = field(default_factory=dict)
    sessions: dict[int, str] = field(default_factory=dict)  # admin id -> portal session key


def build(base: Path, users: int, light_hosts: int) -> Fleet:
    """Start the hosts and seed the database; ``base``: the simulated hosts' folder."""
    from scheduling.models import Policy

    sim = Cluster.objects.create(name="soak", description="libvirt test-driver hosts")
    light_cluster = Cluster.objects.create(name="soak-light", description="Light hosts")
    template = Template.objects.create(
        name="soak-small", vcpus=1, memory_mb=64, disk_gb=1, networks=["default"]
    )
    daemons = []
    for index in range(1, SIM_HOSTS + 1):
        daemon = simhosts.SimHost(name=f"soak-sim-{index}", directory=base / f"sim-{index}")
        simhosts.start(daemon)
        daemons.append(daemon)
        # The last two are reservable: only VMs launched into a lease run there.
        host = Host.objects.create(
            name=f"sim-{index}",
            cluster=sim,
            uri=daemon.uri,
            reservable=index > SIM_HOSTS - RESERVABLE_HOSTS,
        )
        sync_host(host.pk)
    # Light hosts (no disks: they run no VM of Corral's) hold domains Corral did not make,
    # for the sync's numbers and for changes behind its back.
    light = simhosts.light_server(base)
    simhosts.start_light(light)
    light_uris = []
    for index in range(1, light_hosts + 1):
        uri = light.uri(f"soak-light-{index}")
        lightsim.control(uri, "add", vms=LIGHT_DOMAINS, latency_ms=0)
        Host.objects.create(name=f"light-{index}", cluster=light_cluster, uri=uri)
        light_uris.append(uri)
    size = max(20, users // 5)
    pools = [
        create_pool(
            VmPool(
                name=name,
                cluster=sim,
                template=template,
                type=PoolType.MANUAL,
                size=size,
                prestarted_vms=max(4, size // 5),
                max_user_vms=1,
                stateless=stateless,
            )
        )
        for name, stateless in (("soak-kept", False), ("soak-stateless", True))
    ]
    group = Group.objects.create(name="soak-users")
    for pool in pools:
        grant_role(Role.objects.get(name="UserRole"), pool, group=group)
    grant_role(Role.objects.get(name="LeaseUser"), scope_object("system", None), group=group)
    model = get_user_model()
    fleet = Fleet(
        daemons=daemons,
        light=light,
        light_uris=light_uris,
        pools=[p.pk for p in pools],
        template=template.pk,
        cluster_ids=[sim.pk, light_cluster.pk],
        policies=list(
            Policy.objects.filter(
                name__in=["none", "evenly_distributed", "power_saving"]
            ).values_list("pk", flat=True)
        ),
    )
    # Two read the event feed, two the portal's live stream, the rest administer.
    admins = max(5, users // 40)
    for index in range(users):
        is_admin = index < admins
        user = model(
            username=f"soak-{'admin' if is_admin else 'user'}-{index + 1}",
            is_superuser=is_admin,
            is_staff=is_admin,
        )
        user.set_unusable_password()
        user.save()
        if not is_admin:
            user.groups.add(group)
        token = api_tokens.issue(user)[1]
        (fleet.admins if is_admin else fleet.users)[user.pk] = token
        if is_admin:
            # A signed-in browser's session, for the portal's live stream.
            browser = Client()
            browser.force_login(user)
            fleet.sessions[user.pk] = browser.cookies[settings.SESSION_COOKIE_NAME].value
    return fleet
