"""Static files served by the web process itself (WhiteNoise), under WSGI and ASGI alike.

Under ASGI Django would read a file response's synchronous iterator whole in a thread before
sending it ("must consume synchronous iterators"); here the file is handed over as an
asynchronous iterator instead, sent chunk by chunk from the event loop. Both modes of the
middleware stack are supported (it runs synchronously while a sync-only middleware sits below
it).
"""

from __future__ import annotations

import warnings

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        with warnings.catch_warnings():
            # STATIC_ROOT exists once collectstatic ran (make serve); before (development,
            # tests) the files are found in the apps or not needed.
            warnings.filterwarnings("ignore", message="No directory at", category=UserWarning)
            self.whitenoise = WhiteNoiseMiddleware(get_response)
        self.prefix = "/" + settings.STATIC_URL.lstrip("/")
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def _static_response(self, request):
        if not request.path_info.startswith(self.prefix):
            return None
        whitenoise = self.whitenoise
        found = (
            whitenoise.find_file(request.path_info)
            if whitenoise.autorefresh
            else whitenoise.files.get(request.path_info)
        )
        if found is None:
            return None
        response = whitenoise.serve(found, request)
        if isinstance(request, ASGIRequest) and response.streaming and not response.is_async:
            response.streaming_content = _chunks(response.streaming_content)
        return response

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        return self._static_response(request) or self.get_response(request)

    async def _acall(self, request):
        return self._static_response(request) or await self.get_response(request)


async def _chunks(iterator):
    for chunk in iterator:
        yield chunk
