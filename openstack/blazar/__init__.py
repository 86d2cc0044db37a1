"""OpenStack Blazar's reservation API v1 at /reservation/v1: a view of the leases app (the
same models and services as /api/leases/) that Blazar's own clients work against."""
