"""Light simulated hosts: one process serves many (``server``), reached through a driver
backend of their own (``driver``) instead of libvirt."""
