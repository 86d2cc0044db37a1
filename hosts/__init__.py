"""Clusters, hosts, templates and VMs: the inventory, and (later) the libvirt driver behind it."""
