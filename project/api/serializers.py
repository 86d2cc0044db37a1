"""Serializer plumbing shared by every app's API.

``ModelCleanSerializer`` runs the model's own validation (field validators, ``clean()``,
unique constraints) so the API and the admin enforce the same rules, and reports failures
field by field. ``ScopedRelatedField`` only accepts related objects the caller may see;
``NameRelatedField`` names related objects by a name, and refuses names no object can have.
"""

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from rest_framework import serializers
from rest_framework.settings import api_settings

from project.access.permissions import viewable


class ScopedRelatedField(serializers.PrimaryKeyRelatedField):
    """A primary key of an object the caller may see; others are reported as not existing."""

    def get_queryset(self):
        queryset = super().get_queryset()
        request = self.context.get("request")
        if request is None:
            return queryset.none()
        return viewable(queryset, request.user)


class NameRelatedField(serializers.SlugRelatedField):
    """A related object named by a text field (a name, a username).

    A name holding a null character is refused before the lookup: no object can be named so,
    and PostgreSQL rejects such text outright (a 500 instead of a field message).
    """

    default_error_messages = {
        **serializers.SlugRelatedField.default_error_messages,
        "null_characters": "Null characters are not allowed.",
    }

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("null_characters")
        return super().to_internal_value(data)


class ModelCleanSerializer(serializers.ModelSerializer):
    """A model serializer that validates through ``Model.full_clean()``."""

    serializer_related_field = ScopedRelatedField

    def get_validators(self):
        # Unique constraints are checked by full_clean(), which names the field to correct.
        return []

    def unsaved_instance(self) -> models.Model:
        """The object as it will be saved: validated, not yet written."""
        return self._unsaved

    def validate(self, attrs):
        attrs = super().validate(attrs)
        self.prepare(attrs)
        model = self.Meta.model
        # Validate a fresh copy so a failed validation leaves the loaded object untouched.
        instance = model() if self.instance is None else model.objects.get(pk=self.instance.pk)
        for name, value in attrs.items():
            if _is_model_field(model, name) and not model._meta.get_field(name).many_to_many:
                setattr(instance, name, value)
        try:
            instance.full_clean(exclude=self.clean_exclude())
        except DjangoValidationError as exc:
            raise serializers.ValidationError(_constraint_errors_on_fields(model, exc)) from exc
        self._unsaved = instance
        return attrs

    def prepare(self, attrs: dict) -> None:
        """Fill in derived values in ``attrs`` before validation (defaults from related objects)."""

    def clean_exclude(self) -> list[str]:
        return []


def _constraint_errors_on_fields(model, exc: DjangoValidationError) -> dict:
    """Report a broken unique constraint on the field a person would correct (its name)."""
    errors = serializers.as_serializer_error(exc)
    general = [
        *errors.pop(NON_FIELD_ERRORS, []),
        *errors.pop(api_settings.NON_FIELD_ERRORS_KEY, []),
    ]
    for constraint in model._meta.constraints:
        fields = getattr(constraint, "fields", ())
        message = getattr(constraint, "violation_error_message", None)
        if not fields or str(message) not in [str(m) for m in general]:
            continue
        field = "name" if "name" in fields else fields[-1]
        general = [m for m in general if str(m) != str(message)]
        errors.setdefault(field, []).append(str(message))
    if general:
        errors[api_settings.NON_FIELD_ERRORS_KEY] = general
    return errors


def _is_model_field(model, name: str) -> bool:
    try:
        model._meta.get_field(name)
    except Exception:
        return False
    return True
