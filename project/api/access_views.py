"""API for roles, grants (``/api/permissions/``), users, groups and ``/api/me/``."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import transaction
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from project.access import grants as grant_service
from project.access import scopes, tokens
from project.access.accounts import RENAME_REFUSED, may_rename
from project.access.permissions import holds, holds_at_system
from project.access.roles import delete_grant_permissions, ensure_grant_permissions
from project.api.access_serializers import (
    ActionSerializer,
    GrantSerializer,
    GroupSerializer,
    MeSerializer,
    RoleSerializer,
    UserSerializer,
    action_name,
    action_permissions,
)
from project.api.viewsets import ScopedModelViewSet
from project.filters import ORDERING_DESCRIPTION, ordering_schema, ordering_terms
from project.models import Role

User = get_user_model()
MANAGE_ROLES = "project.manage_roles"
GRANT_ID_PATTERN = "[ug][0-9]+"


class RoleViewSet(viewsets.ModelViewSet):
    """Roles: named sets of actions. Everyone may read them; built-in roles are locked."""

    queryset = Role.objects.prefetch_related("actions__content_type")
    serializer_class = RoleSerializer
    filterset_fields = ["name", "builtin"]
    search_fields = ["name", "description"]
    ordering_fields = ["name", "id"]

    def check_permissions(self, request):
        super().check_permissions(request)
        if self.action not in ("list", "retrieve", "actions") and not holds_at_system(
            request.user, MANAGE_ROLES
        ):
            raise PermissionDenied("You may not manage roles.")

    def check_object_permissions(self, request, obj):
        super().check_object_permissions(request, obj)
        if self.action in ("update", "partial_update", "destroy") and obj.builtin:
            raise PermissionDenied("Built-in roles are locked; create a role of your own instead.")

    @transaction.atomic
    def perform_create(self, serializer):
        role = serializer.save()
        ensure_grant_permissions(role)

    @transaction.atomic
    def perform_update(self, serializer):
        serializer.save()

    @transaction.atomic
    def perform_destroy(self, instance):
        delete_grant_permissions(instance)
        instance.delete()

    @extend_schema(responses=ActionSerializer(many=True))
    @action(detail=False, pagination_class=None, filter_backends=[])
    def actions(self, request):
        """Every action a role may include."""
        rows = [
            {"name": action_name(p), "description": p.name}
            for p in action_permissions().order_by("content_type__app_label", "codename")
        ]
        return Response(ActionSerializer(rows, many=True).data)


def _int_or_400(value: str | None, name: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise ValidationError({name: "A whole number is required."}) from None


def _lookup(model, value, field: str, name: str):
    if value in (None, ""):
        return None
    if "\x00" in value:
        raise ValidationError({name: "Null characters are not allowed."})
    found = model.objects.filter(**{field: value}).first()
    if found is None:
        raise ValidationError({name: f"No {name} named {value!r}."})
    return found


GRANT_ID = OpenApiParameter(
    "id",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    pattern=f"^{GRANT_ID_PATTERN}$",
    description="u<n> for a user's grant, g<n> for a group's.",
)


def _grant_ordering(value: str | None) -> list[str]:
    """``?ordering=role,-principal`` as keys of ``grant_service.GRANT_ORDERINGS``."""
    return ordering_terms(value, list(grant_service.GRANT_ORDERINGS))


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("role", OpenApiTypes.STR),
            OpenApiParameter("user", OpenApiTypes.STR),
            OpenApiParameter("group", OpenApiTypes.STR),
            OpenApiParameter("object_type", OpenApiTypes.STR, enum=scopes.names()),
            OpenApiParameter("object_id", OpenApiTypes.INT),
            OpenApiParameter(
                "ordering",
                ordering_schema(list(grant_service.GRANT_ORDERINGS)),
                description=ORDERING_DESCRIPTION,
                style="form",
                explode=False,
            ),
        ]
    ),
    retrieve=extend_schema(parameters=[GRANT_ID]),
    destroy=extend_schema(parameters=[GRANT_ID]),
)
class GrantViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Grants of roles to users and groups on objects (or the whole system)."""

    serializer_class = GrantSerializer
    filter_backends = []
    lookup_value_regex = GRANT_ID_PATTERN

    def get_queryset(self):
        params = self.request.query_params
        object_type = params.get("object_type") or None
        if object_type is not None and object_type not in scopes.names():
            raise ValidationError({"object_type": f"Expected one of {', '.join(scopes.names())}."})
        return grant_service.grant_rows(
            self.request.user,
            ordering=_grant_ordering(params.get("ordering")),
            role=_lookup(Role, params.get("role"), "name", "role"),
            user=_lookup(User, params.get("user"), "username", "user"),
            group=_lookup(Group, params.get("group"), "name", "group"),
            object_type=object_type,
            object_id=_int_or_400(params.get("object_id"), "object_id"),
        )

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(
            self.get_serializer(grant_service.to_grants(page), many=True).data
        )

    def get_object(self):
        grant_id = self.kwargs["pk"]
        if not grant_service.grant_rows(self.request.user, grant_id=grant_id)[:1]:
            raise Http404
        grant = grant_service.get_grant(grant_id)
        if grant is None:
            raise Http404
        return grant

    @extend_schema(
        responses={
            201: GrantSerializer,
            200: OpenApiResponse(GrantSerializer, description="The grant was there already."),
        }
    )
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            grant, created = grant_service.grant_role(
                data["role"],
                data["object"],
                user=data.get("user"),
                group=data.get("group"),
                granted_by=request.user,
            )
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        return Response(
            self.get_serializer(grant).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    def perform_destroy(self, grant):
        try:
            grant_service.revoke(grant, revoked_by=self.request.user)
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc


class UserViewSet(ScopedModelViewSet):
    """Users. Admins manage them; everyone else sees only themselves. Users are deactivated,
    not deleted, so what they did stays attributed."""

    queryset = User.objects.prefetch_related("groups").order_by("username")
    http_method_names = ["get", "post", "put", "patch", "head", "options"]
    filterset_fields = ["username", "is_active", "is_staff", "is_superuser"]
    search_fields = ["username", "email", "first_name", "last_name"]
    ordering_fields = ["username", "id", "date_joined", "last_login"]
    action_permissions = {"activate": "auth.change_user", "deactivate": "auth.change_user"}

    serializer_class = UserSerializer

    def get_queryset(self):
        visible = super().get_queryset()
        return visible | User.objects.filter(pk=self.request.user.pk).prefetch_related("groups")

    def check_create_permission(self, instance) -> None:
        if not holds_at_system(self.request.user, "auth.add_user"):
            raise PermissionDenied("You may not create users.")

    def perform_update(self, serializer):
        data = serializer.validated_data
        user = serializer.instance
        if ("is_staff" in data or "groups" in data) and not holds(
            self.request.user, "auth.change_user", user
        ):
            raise PermissionDenied("You may not change your own groups or admin access.")
        if data.get("username", user.username) != user.username and not may_rename(
            self.request.user, user
        ):
            raise PermissionDenied({"username": [RENAME_REFUSED]})
        super().perform_update(serializer)

    def check_object_permissions(self, request, obj):
        # Everyone may change their own first and last name, e-mail and password (not their
        # username: perform_update refuses that).
        if obj.pk == request.user.pk and self.action in ("update", "partial_update"):
            return
        super().check_object_permissions(request, obj)

    def perform_create(self, serializer):
        with transaction.atomic():
            self.check_create_permission(None)
            serializer.save()

    @extend_schema(
        request=None,
        responses={200: UserSerializer, 400: OpenApiResponse(description="Deactivating yourself.")},
    )
    @action(detail=True, methods=["post"])
    def deactivate(self, request, pk=None):
        """Deactivate a user: they can no longer log in or use the API; their grants stay."""
        user = self.get_object()
        if user.pk == request.user.pk:
            raise ValidationError({"detail": "You cannot deactivate yourself."})
        user.is_active = False
        user.save(update_fields=["is_active"])
        tokens.revoke_all(user)
        return Response(self.get_serializer(user).data)

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def activate(self, request, pk=None):
        """Let a deactivated user log in again."""
        user = self.get_object()
        user.is_active = True
        user.save(update_fields=["is_active"])
        return Response(self.get_serializer(user).data)


class GroupViewSet(ScopedModelViewSet):
    """Groups of users, for granting roles to many users at once. Managed by admins; others see
    the groups they belong to."""

    queryset = Group.objects.prefetch_related("user_set").order_by("name")
    serializer_class = GroupSerializer
    filterset_fields = ["name"]
    search_fields = ["name"]
    ordering_fields = ["name", "id"]

    def get_queryset(self):
        visible = super().get_queryset()
        # A sub-select, not a join on the members: a join would list a group once per member.
        own = Group.objects.filter(user=self.request.user).values("pk")
        return visible | Group.objects.filter(pk__in=own).prefetch_related("user_set")

    def check_create_permission(self, instance) -> None:
        if not holds_at_system(self.request.user, "auth.add_group"):
            raise PermissionDenied("You may not create groups.")

    def perform_create(self, serializer):
        with transaction.atomic():
            self.check_create_permission(None)
            serializer.save()


class MeView(APIView):
    """Who is calling, and every grant they hold (directly or through a group)."""

    @extend_schema(responses=MeSerializer)
    def get(self, request):
        user = request.user
        grants = grant_service.to_grants(grant_service.grant_rows(user, only_own=True))
        data = {
            "id": user.pk,
            "username": user.username,
            "email": user.email,
            "first_name": user.first_name,
            "last_name": user.last_name,
            "is_superuser": user.is_superuser,
            "is_staff": user.is_staff,
            "groups": sorted(user.groups.values_list("name", flat=True)),
            "grants": grants,
        }
        return Response(MeSerializer(data).data)
