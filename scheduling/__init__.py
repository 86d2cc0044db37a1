"""Scheduling policies: filters, weights and balancers that choose a host for each VM."""
