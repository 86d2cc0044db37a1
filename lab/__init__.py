"""The lab: what development, the test suite and the benchmarks run Corral on, never part of
the product. Simulated hosts (libvirt test-driver daemons, and light hosts served by one
process through their own driver backend), real QEMU hosts on session daemons, the tiny guest
they boot, the lab's part of the demo, and the commands that start them (``simhosts``,
``tinyguest``, ``devstack``).

Installed only when development (DEBUG on) or test settings ask for it; production settings
leave it out, so they refuse simulator URIs like any other unknown driver. No product app
imports it (an import-linter contract).
"""
