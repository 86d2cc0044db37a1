"""What the OpenStack APIs opened by a Keystone token (Nova, Glance, Blazar) share: a DRF view
authenticated by ``X-Auth-Token``, JSON in (through the depth-limited parser) and out, and
left out of Corral's OpenAPI schema (each API is documented by OpenStack). Each API's
``base.py`` adds its own error shape and content negotiation."""

from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from openstack.identity.base import KeystoneTokenAuthentication
from project.api.parsers import JSONParser


class OpenStackView(APIView):
    authentication_classes = [KeystoneTokenAuthentication]
    permission_classes = [IsAuthenticated]
    renderer_classes = [JSONRenderer]
    parser_classes = [JSONParser]
    schema = None
