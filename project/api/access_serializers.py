"""API representations of roles, grants, users and groups."""

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from project.access import scopes
from project.access.accounts import check_username_free
from project.access.grants import Grant, scope_object
from project.access.roles import action_apps
from project.api.serializers import NameRelatedField
from project.models import Role

User = get_user_model()


def action_name(permission: Permission) -> str:
    return f"{permission.content_type.app_label}.{permission.codename}"


def action_permissions():
    return (
        Permission.objects.filter(content_type__app_label__in=action_apps() + ("auth",))
        .exclude(codename__startswith="role_")
        .select_related("content_type")
    )


class ActionSerializer(serializers.Serializer):
    name = serializers.CharField(read_only=True)
    description = serializers.CharField(read_only=True)


class ActionNamesField(serializers.ListField):
    """A role's actions by name: written as a list of names, read from its permissions."""

    def to_representation(self, permissions):
        return sorted(action_name(p) for p in permissions.all())


class RoleSerializer(serializers.ModelSerializer):
    actions = ActionNamesField(
        child=serializers.CharField(), help_text="Actions such as hosts.start_virtualmachine."
    )

    class Meta:
        model = Role
        fields = ["id", "name", "description", "builtin", "actions"]
        read_only_fields = ["builtin"]

    def validate_name(self, value: str) -> str:
        if self.instance is not None and value != self.instance.name:
            raise serializers.ValidationError("A role cannot be renamed; create a new one.")
        return value

    def validate_actions(self, value: list[str]) -> list[Permission]:
        known = {action_name(p): p for p in action_permissions()}
        unknown = sorted(set(value) - known.keys())
        if unknown:
            raise serializers.ValidationError(f"Unknown actions: {', '.join(unknown)}.")
        return [known[name] for name in dict.fromkeys(value)]

    def validate(self, attrs):
        # Validate a copy loaded from the database: a role built afresh with the same id and
        # name would clash with itself in the unique checks.
        role = Role() if self.instance is None else Role.objects.get(pk=self.instance.pk)
        role.name = attrs.get("name", role.name)
        role.description = attrs.get("description", role.description)
        try:
            role.full_clean(exclude=["grant_codename"])
        except DjangoValidationError as exc:
            raise serializers.ValidationError(serializers.as_serializer_error(exc)) from exc
        return attrs


class GrantSerializer(serializers.Serializer):
    """A role held by a user or a group on an object (or on the whole system)."""

    id = serializers.CharField(
        read_only=True, help_text="u<n> for a user's grant, g<n> for a group's."
    )
    role = NameRelatedField(slug_field="name", queryset=Role.objects.all())
    user = NameRelatedField(
        slug_field="username", queryset=User.objects.all(), required=False, allow_null=True
    )
    group = NameRelatedField(
        slug_field="name", queryset=Group.objects.all(), required=False, allow_null=True
    )
    object_type = serializers.ChoiceField(choices=[])
    object_id = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    object_name = serializers.CharField(read_only=True)

    def get_fields(self):
        fields = super().get_fields()
        # Scopes are registered by the apps that own them, once every app is ready.
        fields["object_type"].choices = scopes.names()
        return fields

    def to_representation(self, grant: Grant):
        return {
            "id": grant.id,
            "role": grant.role.name if grant.role else None,
            "user": grant.user.username if grant.user else None,
            "group": grant.group.name if grant.group else None,
            "object_type": grant.object_type,
            "object_id": grant.object_id,
            "object_name": grant.object_name,
        }

    def validate(self, attrs):
        if bool(attrs.get("user")) == bool(attrs.get("group")):
            raise serializers.ValidationError(
                {"user": "Give either a user or a group (exactly one)."}
            )
        try:
            request = self.context.get("request")
            attrs["object"] = scope_object(
                attrs["object_type"],
                attrs.get("object_id"),
                seen_by=request.user if request is not None else None,
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(serializers.as_serializer_error(exc)) from exc
        return attrs


class UserSerializer(serializers.ModelSerializer):
    password = serializers.CharField(
        write_only=True, required=False, style={"input_type": "password"}, trim_whitespace=False
    )
    groups = NameRelatedField(
        slug_field="name", queryset=Group.objects.all(), many=True, required=False
    )

    class Meta:
        model = User
        fields = [
            "id",
            "username",
            "password",
            "email",
            "first_name",
            "last_name",
            "is_active",
            "is_staff",
            "is_superuser",
            "groups",
            "date_joined",
            "last_login",
        ]
        read_only_fields = ["is_active", "is_superuser", "date_joined", "last_login"]
        # Uniqueness is checked regardless of case below, in place of the exact-match check.
        extra_kwargs = {"username": {"validators": [User.username_validator]}}

    def validate_username(self, value: str) -> str:
        try:
            check_username_free(value, other_than=self.instance)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict["username"]) from exc
        return value

    def validate(self, attrs):
        password = attrs.get("password")
        if self.instance is None and not password:
            raise serializers.ValidationError({"password": "A new user needs a password."})
        if password:
            candidate = User(
                username=attrs.get("username", getattr(self.instance, "username", "")),
                email=attrs.get("email", getattr(self.instance, "email", "")),
                first_name=attrs.get("first_name", getattr(self.instance, "first_name", "")),
                last_name=attrs.get("last_name", getattr(self.instance, "last_name", "")),
            )
            try:
                password_validation.validate_password(password, candidate)
            except DjangoValidationError as exc:
                raise serializers.ValidationError({"password": list(exc.messages)}) from exc
        return attrs

    def create(self, validated_data):
        groups = validated_data.pop("groups", [])
        password = validated_data.pop("password")
        user = User(**validated_data)
        user.set_password(password)
        user.save()
        user.groups.set(groups)
        return user

    def update(self, instance, validated_data):
        groups = validated_data.pop("groups", None)
        password = validated_data.pop("password", None)
        for name, value in validated_data.items():
            setattr(instance, name, value)
        if password:
            instance.set_password(password)
        instance.save()
        if groups is not None:
            instance.groups.set(groups)
        return instance


class GroupSerializer(serializers.ModelSerializer):
    users = NameRelatedField(
        slug_field="username",
        queryset=User.objects.all(),
        many=True,
        required=False,
        source="user_set",
    )

    class Meta:
        model = Group
        fields = ["id", "name", "users"]


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()
    email = serializers.CharField()
    first_name = serializers.CharField()
    last_name = serializers.CharField()
    is_superuser = serializers.BooleanField()
    is_staff = serializers.BooleanField()
    groups = serializers.ListField(child=serializers.CharField())
    grants = GrantSerializer(many=True)
