"""The log-in pages' answer to a refusal of the lockout: 429 with Retry-After."""

from __future__ import annotations

import math
from functools import wraps

from rest_framework import status


def answers_429_when_locked_out(view):
    """A log-in page view whose form the lockout refused answers 429 with ``Retry-After``
    (the form and its message are shown as for any refusal)."""

    @wraps(view)
    def login_page(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        form = (getattr(response, "context_data", None) or {}).get("form")
        locked = getattr(form, "locked_out", None)
        if locked is not None:
            response.status_code = status.HTTP_429_TOO_MANY_REQUESTS
            response["Retry-After"] = str(math.ceil(locked.seconds))
        return response

    return login_page
