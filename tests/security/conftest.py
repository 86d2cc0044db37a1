"""Fixtures for the security tests: one object of every kind the API serves, and callers.

``world`` fills the database with a cluster and everything that lives in it (a reservable host,
a template, a pool with VMs, a VM with a job, an external domain, a lease, a scheduling policy
with a filter and a weight, an affinity group, a custom role, a group and a grant), so that
every detail URL of the API has a real object to point at.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone

from hosts.models import (
    Cluster,
    ExternalDomain,
    Host,
    Image,
    ImageMember,
    Job,
    Template,
    VirtualMachine,
    VmSnapshot,
)
from leases import services as lease_services
from leases.models import Lease
from pools.models import VmPool
from project import sshkeys
from project.access.grants import grant_role
from project.access.permissions import permission_for
from project.access.roles import ensure_grant_permissions
from project.access.tokens import issue as issue_token
from project.models import Role, SshKey
from scheduling.models import AffinityGroup, Policy, PolicyFilter, PolicyUnit, PolicyWeight
from tests.conftest import unique
from tests.project.sshkeys_data import ED25519

User = get_user_model()


@dataclass
class World:
    """One object of each kind, the owner of the lease, and a pool user's own VM."""

    cluster: Cluster
    host: Host
    template: Template
    image: Image
    pool: VmPool
    pool_vms: list[VirtualMachine]
    vm: VirtualMachine
    job: Job
    external_domain: ExternalDomain
    lease: Lease
    lease_owner: User
    policy: Policy
    policy_filter: PolicyFilter
    policy_weight: PolicyWeight
    affinity_group: AffinityGroup
    role: Role
    group: Group
    other_user: User
    image_member: ImageMember
    snapshot: VmSnapshot
    ssh_key: SshKey
    user_grant_id: str
    group_grant_id: str


def build_world() -> World:
    cluster = Cluster.objects.create(name=unique("sec-cluster"))
    host = Host.objects.create(
        cluster=cluster,
        name=unique("sec-host"),
        uri=f"qemu+ssh://root@{unique('sec-node')}.example.org/system",
        status="up",
        cpus=16,
        memory_mb=8192,
        reservable=True,
    )
    template = Template.objects.create(
        name=unique("sec-tmpl"), cluster=cluster, vcpus=1, memory_mb=128, disk_gb=1
    )
    image = Image.objects.create(
        name=unique("sec-image"),
        cluster=cluster,
        kind="disk",
        format="raw",
        size_bytes=512,
        virtual_size_bytes=512,
        sha256="0" * 64,
        file="absent",
    )
    pool = VmPool.objects.create(
        name=unique("sec-pool"), cluster=cluster, template=template, size=2, max_user_vms=2
    )
    pool_vms = [
        VirtualMachine.objects.create(
            name=pool.vm_name(index),
            cluster=cluster,
            template=template,
            pool=pool,
            pool_index=index,
            vcpus=1,
            memory_mb=128,
            disk_gb=1,
        )
        for index in (1, 2)
    ]
    vm = VirtualMachine.objects.create(
        name=unique("sec-vm"), cluster=cluster, template=template, vcpus=1, memory_mb=128, disk_gb=1
    )
    job = Job.objects.create(kind="start", vm=vm, target_name=vm.name)
    lease_owner = User.objects.create_user(unique("lease-owner"), password="pw-Corral-1")
    lease = lease_services.create_lease(
        owner=lease_owner,
        name=unique("sec-lease"),
        start=timezone.now() + timedelta(days=1),
        end=timezone.now() + timedelta(days=1, hours=2),
        reservations=[
            {"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 128, "amount": 1}
        ],
    )
    policy = Policy.objects.create(
        name=unique("sec-policy"),
        balance=PolicyUnit.objects.filter(is_balance=True).order_by("pk").first(),
    )
    policy_filter = PolicyFilter.objects.create(
        policy=policy, unit=PolicyUnit.objects.filter(is_filter=True).order_by("pk").first()
    )
    policy_weight = PolicyWeight.objects.create(
        policy=policy, unit=PolicyUnit.objects.filter(is_weight=True).order_by("pk").first()
    )
    affinity_group = AffinityGroup.objects.create(cluster=cluster, name=unique("sec-affinity"))
    affinity_group.vms.add(vm)
    role = Role.objects.create(name=unique("SecRole").replace("-", "_"))
    role.actions.set([permission_for("hosts.view_virtualmachine")])
    ensure_grant_permissions(role)
    group = Group.objects.create(name=unique("sec-group"))
    other_user = User.objects.create_user(unique("someone"), password="pw-Corral-1")
    user_grant = grant_role(role, cluster, user=other_user)[0]
    ssh_key = sshkeys.add_key(other_user, "laptop", ED25519)
    image_member = ImageMember.objects.create(image=image, user=other_user)
    snapshot = VmSnapshot.objects.create(vm=vm, name=unique("sec-snapshot"), status="ready")
    group_grant = grant_role(role, cluster, group=group)[0]
    external_domain = ExternalDomain.objects.create(
        host=host, uuid=uuid.uuid4(), name=unique("outsider")
    )
    return World(
        cluster=cluster,
        host=host,
        template=template,
        image=image,
        pool=pool,
        pool_vms=pool_vms,
        vm=vm,
        job=job,
        external_domain=external_domain,
        lease=lease,
        lease_owner=lease_owner,
        policy=policy,
        policy_filter=policy_filter,
        policy_weight=policy_weight,
        affinity_group=affinity_group,
        role=role,
        group=group,
        other_user=other_user,
        image_member=image_member,
        snapshot=snapshot,
        ssh_key=ssh_key,
        user_grant_id=user_grant.id,
        group_grant_id=group_grant.id,
    )


@pytest.fixture
def world(db) -> World:
    return build_world()


@pytest.fixture
def pool_user(world, make_user, grant):
    """An ordinary user: UserRole on the world's pool, LeaseUser on the system, and one VM of
    the pool taken (its owner, with UserRole on it, as an allocation leaves it)."""
    user = make_user(unique("pool-user"))
    grant(user, "UserRole", world.pool)
    grant(user, "LeaseUser")
    taken = world.pool_vms[0]
    taken.owner = user
    taken.save(update_fields=["owner"])
    grant(user, "UserRole", taken)
    return user


@pytest.fixture
def token_for(db):
    """token_for(user) -> the value of an ``Authorization`` header for that user."""

    keys: dict[int, str] = {}

    def make(user) -> str:
        if user.pk not in keys:
            keys[user.pk] = issue_token(user)[1]
        return f"Token {keys[user.pk]}"

    return make
