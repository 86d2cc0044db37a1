"""Static files served by the web process itself (WhiteNoise), without a thread per request.

WhiteNoise's middleware is synchronous: in the middle of an async stack Django would run every
request through a thread for it. This one looks the path up in WhiteNoise's index and answers
a static file at once; anything else goes on down the stack as it came (sync or async).
"""

from __future__ import annotations

import warnings

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
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
        return None if found is None else whitenoise.serve(found, request)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        return self._static_response(request) or self.get_response(request)

    async def _acall(self, request):
        response = self._static_response(request)
        if response is None:
            return await self.get_response(request)
        if response.streaming and not response.is_async:
            # A file on local disk is read chunk by chunk on the loop, not in a thread.
            response.streaming_content = _chunks(response.streaming_content)
        return response


async def _chunks(iterator):
    for chunk in iterator:
        yield chunk
