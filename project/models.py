"""Roles (named sets of actions) and the System object that system-wide grants attach to."""

import re
import uuid

from django.conf import settings
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone
from guardian.models import GroupObjectPermission, UserObjectPermission
from knox.models import AbstractAuthToken


class System(models.Model):
    """The whole installation, as one row: the scope of system-wide grants (oVirt's "System")."""

    name = models.CharField(max_length=64, default="Corral")

    class Meta:
        default_permissions = ()
        permissions = [
            ("manage_grants", "Can grant and revoke roles"),
            ("manage_roles", "Can create, change and delete roles"),
        ]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def get(cls) -> "System":
        system, _ = cls.objects.get_or_create(pk=1)
        return system


role_name_validator = RegexValidator(
    r"^[A-Za-z][A-Za-z0-9_]{0,49}$",
    "A role name starts with a letter and has only letters, digits and underscores (at most 50).",
)


class Role(models.Model):
    """A named set of actions; granting it to a user or group at a scope allows those actions there.

    Built-in roles are locked: their name and actions come from code (project/access/roles.py).
    A grant is stored by django-guardian as the permission ``role_<name>`` on the scope object.
    """

    name = models.CharField(
        "name in the API",
        max_length=50,
        unique=True,
        validators=[role_name_validator],
        help_text="One word, as the API names the role (LabManager); the admin console says "
        "it in words (Lab manager).",
    )
    description = models.TextField(blank=True)
    builtin = models.BooleanField(default=False, editable=False)
    actions = models.ManyToManyField(Permission, blank=True, related_name="corral_roles")
    grant_codename = models.CharField(max_length=100, unique=True, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        """The role as the admin console names it everywhere: "User role", "Lease user"."""
        return self.human_name

    def save(self, *args, **kwargs) -> None:
        self.grant_codename = grant_codename_for(self.name)
        super().save(*args, **kwargs)

    def clean(self) -> None:
        self.grant_codename = grant_codename_for(self.name)
        clash = Role.objects.filter(grant_codename=self.grant_codename).exclude(pk=self.pk)
        if self.name and clash.exists():
            raise ValidationError({"name": f"A role named {clash.get().name!r} exists already."})

    @property
    def human_name(self) -> str:
        """The name as a sentence says it: LeaseUser is "Lease user", UserVmManager
        "User VM manager"."""
        return human_role_name(self.name)


def grant_codename_for(role_name: str) -> str:
    return f"role_{role_name.lower()}"


_ACRONYMS = {"vm": "VM", "vms": "VMs", "api": "API"}


def human_role_name(role_name: str) -> str:
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", role_name)
    if not words:
        return role_name
    said = [_ACRONYMS.get(w.lower(), w if w.isupper() and len(w) > 1 else w.lower()) for w in words]
    return said[0][:1].upper() + said[0][1:] + "".join(f" {w}" for w in said[1:])


def _grant_str(row, principal) -> str:
    """A grant as the admin's messages name it: "Lease user for alice on VM pool lab"."""
    role = Role.objects.filter(grant_codename=row.permission.codename).first()
    role_name = role.human_name if role is not None else row.permission.name
    target = row.content_object
    if isinstance(target, System):
        where = "the whole system"
    else:
        where = f"{target._meta.verbose_name} {target}" if target is not None else "nothing"
    return f"{role_name} for {principal} on {where}"


class UserGrant(UserObjectPermission):
    """A role held by one user on one object: a django-guardian row, shown in the admin."""

    class Meta:
        proxy = True
        verbose_name = "grant to a user"
        verbose_name_plural = "grants to users"
        default_permissions = ()

    def __str__(self) -> str:
        return _grant_str(self, self.user)


class GroupGrant(GroupObjectPermission):
    """A role held by one group on one object: a django-guardian row, shown in the admin."""

    class Meta:
        proxy = True
        verbose_name = "grant to a group"
        verbose_name_plural = "grants to groups"
        default_permissions = ()

    def __str__(self) -> str:
        return _grant_str(self, f"group {self.group}")


class EventKind(models.TextChoices):
    CHANGED = "changed", "Object changed"
    JOB = "job", "Job progressed"
    ALERT = "alert", "Alert"


class Event(models.Model):
    """An append-only feed of what changed; the id is the token clients resume from.

    The scope fields say which VM, cluster, pool or lease the event belongs to, so a client
    only receives events about objects its grants cover.
    """

    kind = models.CharField(max_length=16, choices=EventKind.choices)
    object_type = models.CharField(max_length=16)
    object_id = models.BigIntegerField(null=True)
    message = models.CharField(max_length=500, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    vm_id = models.BigIntegerField(null=True, blank=True)
    cluster_id = models.BigIntegerField(null=True, blank=True)
    pool_id = models.BigIntegerField(null=True, blank=True)
    lease_id = models.BigIntegerField(null=True, blank=True)
    user_id = models.BigIntegerField(
        null=True, blank=True, help_text="The user the event concerns (e.g. who asked for a job)."
    )
    # The scope fields as keys ("system", "cluster:3", "vm:12", "user:5"), set when the event is
    # written: a live reader matches them against the keys its grants cover, without a query.
    scope_keys = models.JSONField(default=list, blank=True)

    grant_scopes = {
        "vm": "vm_id",
        "cluster": "cluster_id",
        "pool": "pool_id",
        "lease": "lease_id",
    }

    class Meta:
        ordering = ["id"]
        default_permissions = ("view",)

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} {self.object_type} {self.object_id}: {self.message}"


class LoopLock(models.Model):
    """Who runs a periodic loop now, until when: the loop runs once per tick across every
    task cluster, and a holder that died loses it when it expires."""

    name = models.CharField(max_length=64, primary_key=True)
    holder = models.CharField(max_length=200)
    expires_at = models.DateTimeField()

    class Meta:
        default_permissions = ()

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder} until {self.expires_at}"


class LoginFailure(models.Model):
    """A failed log-in for a username (as typed, lower-cased) from a client address: enough of
    them in a short time lock that username out for that address, or the address out for every
    username, at every entry point (project/lockout/)."""

    username = models.CharField(max_length=150)
    address = models.CharField(
        max_length=50,
        blank=True,
        # In the database too: processes still running the previous release insert without it.
        db_default="",
        help_text="The client's address (an IPv6 client's /64 network); empty when unknown.",
    )
    at = models.DateTimeField(db_index=True)

    class Meta:
        default_permissions = ()
        indexes = [
            models.Index(fields=["address", "username", "at"], name="loginfailure_addr_user_at"),
            models.Index(fields=["address", "at"], name="loginfailure_address_at"),
        ]

    def __str__(self) -> str:
        return f"{self.username} from {self.address or 'an unknown address'} at {self.at}"


class SshKey(models.Model):
    """An OpenSSH public key of a user: put on every VM the user is handed (cloud-init), so they
    can log in. ``fingerprint`` is OpenSSH's ``SHA256:…`` of the key."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys"
    )
    name = models.CharField(max_length=64)
    public_key = models.TextField(max_length=16384)
    fingerprint = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner_id", "name"]
        default_permissions = ()
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="sshkey_name_unique_per_user"),
            models.UniqueConstraint(
                fields=["owner", "fingerprint"], name="sshkey_fingerprint_unique_per_user"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})"


def new_credential_id() -> str:
    return uuid.uuid4().hex


class ApplicationCredential(models.Model):
    """A Keystone application credential: a secret a user gives a machine (a CI farm) to log in
    to the OpenStack APIs as them, without their password. It acts with its owner's grants,
    never more, and stops working when it expires or is deleted. Only a hash of the secret is
    kept; the secret is shown once, when the credential is made."""

    id = models.CharField(max_length=32, primary_key=True, default=new_credential_id)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="application_credentials"
    )
    name = models.CharField(max_length=255)
    description = models.TextField(max_length=4096, null=True, blank=True)
    secret_hash = models.CharField(max_length=256, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    unrestricted = models.BooleanField(
        default=False,
        help_text="Whether tokens it gives may make and delete application credentials.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner_id", "name"]
        default_permissions = ()
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"], name="applicationcredential_name_unique_per_user"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class TokenKind(models.TextChoices):
    API = "api", "API"
    KEYSTONE = "keystone", "OpenStack log-in"


class APIToken(AbstractAuthToken):
    """A token a client signs in with: to Corral's API (``Authorization: Token``, made at
    /api/auth/token/, /api/me/tokens/ or the portal) or to the OpenStack APIs
    (``X-Auth-Token``, made by a Keystone log-in, for a password or an application
    credential). Only a SHA-512 of it is kept (django-rest-knox's model): the token itself is
    shown once, when it is made. Each expires, and goes at once when revoked; one made for an
    application credential goes with the credential too (project/access/tokens.py)."""

    id = models.BigAutoField(primary_key=True)
    # Knox's primary key; here a unique column, so the id that names a token tells nothing of it.
    digest = models.CharField(max_length=128, unique=True, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    # Set by project/access/tokens.py, at the same moment as the expiry is reckoned from.
    created = models.DateTimeField(default=timezone.now, editable=False)
    kind = models.CharField(max_length=16, choices=TokenKind.choices, default=TokenKind.API)
    name = models.CharField(max_length=100, blank=True, help_text="What the token is for.")
    credential = models.ForeignKey(
        ApplicationCredential,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="tokens",
        help_text="The application credential a Keystone log-in gave it for.",
    )

    class Meta:
        ordering = ["-created", "-id"]
        default_permissions = ()
        verbose_name = "token"

    def __str__(self) -> str:
        return f"{self.get_kind_display()} token {self.pk} of {self.user}"
