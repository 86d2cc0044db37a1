"""The host driver backend of simulated hosts (``lab/simhosts.py``): libvirt's backend, for the
URIs of libvirt's test driver (``test:///default``, ``test+unix://…``), with what that driver
lacks made up for (``driver``). The lab registers it with
``hosts.driver.register_libvirt_backend``."""
