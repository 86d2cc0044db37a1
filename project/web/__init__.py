"""The web tier's machinery around Django: the worker process of ``make serve``
(``worker``), the threads requests run on under ASGI (``request_threads``), static files,
the Content-Security-Policy, and the client's address behind trusted proxies."""
