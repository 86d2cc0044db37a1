"""Checks every request under /api/ passes before its view runs, whatever the view is built on
(viewsets, plain APIViews, DRF's token view) and whether or not it reads what it was sent.

- A body larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413, even for an operation that
  takes no body. Multipart bodies are left to Django's multipart parser, which applies the
  limit to their fields but streams file parts to disk.
- A query parameter the operation does not document is a 400 naming it
  (``project/api/query_parameters.py``).

Both answer JSON, under DEBUG too (Django's own handling of a refused request would show its
debug page there).
"""

from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import JsonResponse
from django.http.request import RawPostDataException

from project.api.errors import refusal_message, too_large_message
from project.api.query_parameters import refused_parameters


class ApiRequestMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if not request.path_info.startswith("/api/"):
            return None
        if request.content_type != "multipart/form-data":
            try:
                request.body  # noqa: B018 - reading it is what applies Django's size limit
            except RequestDataTooBig:
                return JsonResponse({"detail": too_large_message()}, status=413)
            except RawPostDataException:  # the form was parsed already: it was within limits
                pass
        try:
            given = request.GET
        except TooManyFieldsSent as exc:
            return JsonResponse({"detail": refusal_message(exc)}, status=400)
        refused = refused_parameters(view_func, request.method, given) if given else None
        if refused:
            return JsonResponse(refused, status=400)
        return None
