"""Scheduling policies: filters, weights and balancers that choose a host for each VM.

Shaped like the other apps (``models``, ``services``, ``api/``, ``admin``, ``tasks``) but with no
portal pages, so no ``urls.py`` or ``views.py``: policies, affinity groups and the balancer's
dry run are kept in the admin console and the API.
"""
