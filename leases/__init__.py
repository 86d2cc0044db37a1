"""Leases: capacity reserved for a time window."""
