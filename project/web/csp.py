"""The Content-Security-Policy of every response (django-csp), and the few pages that need
more than the site-wide policy in settings.CONTENT_SECURITY_POLICY.

- Swagger UI (/api/docs/) draws its icons from data: URLs in its stylesheet; its start-up
  script is served as a file of its own (drf-spectacular's split view), so scripts stay 'self'.
- The browsable API (an /api/ URL opened in a browser) is Django REST framework's page, with
  style attributes and a <style> element for code highlighting in its templates: its styles
  may be inline. Its scripts stay 'self', as everywhere.
"""

from csp.constants import SELF, UNSAFE_INLINE
from csp.decorators import csp_update
from csp.middleware import CSPMiddleware
from rest_framework.renderers import BrowsableAPIRenderer

api_docs_policy = csp_update({"img-src": ["data:"]})

BROWSABLE_API_POLICY = {"style-src": [SELF, UNSAFE_INLINE]}


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's middleware, relaxed for the browsable API's pages only."""

    def get_policy_parts(self, request, response, report_only=False):
        parts = super().get_policy_parts(request, response, report_only)
        if isinstance(getattr(response, "accepted_renderer", None), BrowsableAPIRenderer):
            parts.replace = {**(parts.replace or {}), **BROWSABLE_API_POLICY}
        return parts
