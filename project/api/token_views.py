"""API tokens: one for a username and password (``/api/auth/token/``), and the caller's own
(``/api/me/tokens/``): list, show, make one more, revoke.

A token is in a response once, when it is made; afterwards only what it is (its id, kind,
name, dates) is shown, never the token: only a hash of it is kept (project/access/tokens.py). Each
user sees only their own tokens; another user's does not exist for them (404).
"""

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from project.access import tokens
from project.lockout.api import TokenSerializer
from project.models import APIToken


class IssuedTokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="For `Authorization: Token <token>`; shown once.")
    expires_at = serializers.DateTimeField(source="expiry")


class TokenViewSerializer(serializers.ModelSerializer):
    expires_at = serializers.DateTimeField(source="expiry", read_only=True)
    created_at = serializers.DateTimeField(source="created", read_only=True)
    name = serializers.CharField(max_length=tokens.NAME_LENGTH, required=False, allow_blank=True)
    application_credential = serializers.CharField(
        source="credential_id",
        read_only=True,
        allow_null=True,
        help_text="The application credential a Keystone log-in gave it for, if any.",
    )

    class Meta:
        model = APIToken
        fields = ["id", "kind", "name", "created_at", "expires_at", "application_credential"]
        read_only_fields = ["id", "kind"]


class NewTokenSerializer(TokenViewSerializer):
    token = serializers.CharField(read_only=True, help_text="Shown this once only.")

    class Meta(TokenViewSerializer.Meta):
        fields = [*TokenViewSerializer.Meta.fields, "token"]


class ObtainTokenView(APIView):
    """A new API token for a username and password (refused with 429 while the username or
    the client's address is locked out). Each call makes another token; each expires after
    ``CORRAL_API_TOKEN_DAYS``."""

    serializer_class = TokenSerializer
    permission_classes = [permissions.AllowAny]

    @extend_schema(
        request=TokenSerializer,
        responses={
            200: IssuedTokenSerializer,
            429: OpenApiResponse(
                description="Too many failed log-ins for this username or from this address."
            ),
        },
    )
    def post(self, request):
        serializer = TokenSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        row, key = tokens.issue(serializer.validated_data["user"], name="API log-in")
        return Response(IssuedTokenSerializer({"token": key, "expiry": row.expiry}).data)


class TokenViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """The caller's tokens that still work: their API tokens and their Keystone log-ins'.
    Deleting one revokes it at once."""

    queryset = APIToken.objects.all()
    serializer_class = TokenViewSerializer
    ordering_fields = ["id", "created", "expiry"]
    search_fields = ["name"]
    filterset_fields = ["kind"]

    def get_queryset(self):
        return tokens.listed(self.request.user)

    @extend_schema(request=TokenViewSerializer, responses={201: NewTokenSerializer})
    def create(self, request):
        """Make another API token of the caller's (for a script, a CI farm): the token is in
        this answer only."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        row, key = tokens.issue(request.user, name=serializer.validated_data.get("name", ""))
        row.token = key
        return Response(NewTokenSerializer(row).data, status=status.HTTP_201_CREATED)

    def destroy(self, request, pk=None):
        if not str(pk).isdigit() or not tokens.revoke_own(request.user, int(pk)):
            raise Http404
        return Response(status=status.HTTP_204_NO_CONTENT)
