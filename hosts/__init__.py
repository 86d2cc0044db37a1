"""Clusters, hosts, templates and VMs: the inventory, the libvirt driver behind it, the job
runner and VM operations, and the power-state sync that keeps the database in step with hosts."""
