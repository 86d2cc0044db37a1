"""Grant scopes: the kinds of object a role may be granted on, registered by the apps that own them.

``project`` owns the System (everything is inside it); each app registers its own scopes in
its ``AppConfig.ready()`` (hosts: cluster and VM; pools: pool; leases: lease), with a rank
that orders scopes from the widest to the narrowest. Nothing in ``project`` names them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.apps import apps
from django.contrib.contenttypes.models import ContentType
from django.db.models import Model
from django.db.models.signals import post_delete


@dataclass(frozen=True)
class Scope:
    """A kind of object grants attach to.

    ``contents_need``: an action a role must also hold for a grant on such an object to reach
    the other objects inside it (UserRole on a pool lets a user take VMs from it, not see or
    use the VMs other users took: the pool scope reaches its contents only for roles that
    change the pool).
    """

    name: str
    model_label: str
    rank: int
    contents_need: str | None = None

    @property
    def model(self) -> type[Model]:
        return apps.get_model(self.model_label)


_scopes: dict[str, Scope] = {}

# What runs when a scope object is deleted: name -> post_delete receiver (``on_delete``).
_deleted_receivers: dict[str, Callable] = {}


def register(name: str, model_label: str, *, rank: int, contents_need: str | None = None) -> None:
    """Make ``model_label`` a scope named ``name`` (called from an app's ``ready()``)."""
    _scopes[name] = Scope(name, model_label, rank, contents_need)
    for receiver_name, receiver in _deleted_receivers.items():
        _connect_deleted(receiver_name, receiver, model_label)


def on_delete(name: str, receiver: Callable) -> None:
    """Connect ``receiver`` to post_delete of every scope model, registered now or later.

    project's ``ready()`` connects the removal of the grants on a deleted object: guardian
    keeps object keys as text, so nothing would cascade.
    """
    _deleted_receivers[name] = receiver
    for scope in _scopes.values():
        _connect_deleted(name, receiver, scope.model_label)


def _connect_deleted(name: str, receiver: Callable, model_label: str) -> None:
    post_delete.connect(receiver, sender=model_label, dispatch_uid=f"corral-{name}-{model_label}")


def names() -> list[str]:
    """Every scope name, from the widest to the narrowest."""
    return [scope.name for scope in sorted(_scopes.values(), key=lambda s: (s.rank, s.name))]


def get(name: str) -> Scope:
    return _scopes[name]


def model(name: str) -> type[Model]:
    return _scopes[name].model


def of_model(model_class: type[Model]) -> str | None:
    """The scope a model is, if it is one."""
    label = model_class._meta.label
    for scope in _scopes.values():
        if scope.model_label == label:
            return scope.name
    return None


def content_type(name: str) -> ContentType:
    return ContentType.objects.get_for_model(model(name))


def choices() -> list[tuple[str, str]]:
    """(name, name) pairs for form fields; callable so forms made before apps register see all."""
    return [(name, name) for name in names()]
