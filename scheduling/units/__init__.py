"""Policy units: the Python classes behind filters, weights and balancers."""
