"""The base API viewset: every queryset restricted to what the caller may see, every write checked.

Objects the caller may not see do not exist for them (404); objects they may see but not act on
answer 403. An update that moves an object into another scope is checked as a create there.
Writes are atomic. Subclasses name their model, serializer and filters, and map
extra actions to permissions in ``action_permissions``.
"""

from django.db import transaction
from django.db.models import Model
from rest_framework import viewsets
from rest_framework.exceptions import PermissionDenied

from project.access.permissions import (
    default_action,
    holds,
    placement_refusal,
    scope_keys,
    scope_paths,
    viewable,
)
from project.api.serializers import ModelCleanSerializer

# DRF action -> default verb of the Django permission it needs.
DEFAULT_VERBS = {
    "list": "view",
    "retrieve": "view",
    "create": "add",
    "update": "change",
    "partial_update": "change",
    "destroy": "delete",
}


class ScopedViewSetMixin:
    """Restricts the queryset to viewable rows and checks the action on each object."""

    # Extra actions: DRF action name -> permission ("hosts.operate_virtualmachine").
    action_permissions: dict[str, str] = {}

    def required_permission(self, action: str | None = None) -> str:
        action = action or self.action
        if action in self.action_permissions:
            return self.action_permissions[action]
        return default_action(self.queryset.model, DEFAULT_VERBS.get(action, "view"))

    def get_queryset(self):
        return viewable(super().get_queryset(), self.request.user)

    def check_object_permissions(self, request, obj) -> None:
        super().check_object_permissions(request, obj)
        needed = self.required_permission()
        if not needed.endswith(f".view_{obj._meta.model_name}") and not holds(
            request.user, needed, obj
        ):
            raise PermissionDenied(f"You may not {self._verb()} this {obj._meta.verbose_name}.")

    def _verb(self) -> str:
        return {
            "update": "change",
            "partial_update": "change",
            "destroy": "delete",
        }.get(self.action, self.action.replace("_", " "))

    def check_create_permission(self, instance) -> None:
        """Refuse to create ``instance`` (unsaved) unless the caller holds the add action on it."""
        needed = self.required_permission("create")
        if not holds(self.request.user, needed, instance):
            where = ", ".join(
                f"{name} {getattr(instance, name)}"
                for name in ("cluster", "pool")
                if getattr(instance, f"{name}_id", None)
            )
            raise PermissionDenied(
                f"You may not create a {instance._meta.verbose_name}"
                + (f" in {where}." if where else ".")
            )

    def perform_create(self, serializer) -> None:
        with transaction.atomic():
            self.check_create_permission(serializer.unsaved_instance())
            serializer.save()
        self.reload(serializer)

    def check_placement(self, serializer) -> None:
        """Refuse an update that moves the object into other scopes (another cluster, no
        cluster) unless the caller may add and change it there: a move is a create there."""
        stored = serializer.instance
        if not scope_paths(type(stored)):
            return
        refusal = placement_refusal(self.request.user, _as_saved(serializer), scope_keys(stored))
        if refusal is not None:
            raise PermissionDenied(refusal)

    def perform_update(self, serializer) -> None:
        with transaction.atomic():
            self.check_placement(serializer)
            serializer.save()
        self.reload(serializer)

    def reload(self, serializer) -> None:
        """Answer a write with the object as a list shows it (annotations included)."""
        serializer.instance = self.queryset.all().get(pk=serializer.instance.pk)

    def perform_destroy(self, instance) -> None:
        with transaction.atomic():
            instance.delete()


def _as_saved(serializer) -> Model:
    """The object an update will write: the stored row with the validated fields set."""
    if isinstance(serializer, ModelCleanSerializer):
        return serializer.unsaved_instance()
    model = type(serializer.instance)
    instance = model._default_manager.get(pk=serializer.instance.pk)
    for field in model._meta.concrete_fields:
        if field.name in serializer.validated_data:
            setattr(instance, field.name, serializer.validated_data[field.name])
    return instance


class ScopedModelViewSet(ScopedViewSetMixin, viewsets.ModelViewSet):
    """List, retrieve, create, update and delete, each through the role grants."""

    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]


class ScopedReadOnlyViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """List and retrieve through the role grants."""
