"""Corral benchmarks: run each scenario on a throwaway database and print one table.

    make bench                      # SQLite
    DATABASE_URL=postgres://... make bench
    BENCH_ONLY=sharded_sync make bench   # only the scenarios whose name holds this
    .venv/bin/python bench/run.py open_pages     # only the scenarios named

Figures are wall-clock on this machine plus query counts; goals come from the issues.
"""

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.test_settings")

import django  # noqa: E402

django.setup()

import logging  # noqa: E402

from django.db import connection, reset_queries  # noqa: E402
from django.test.utils import (  # noqa: E402
    CaptureQueriesContext,
    setup_databases,
    setup_test_environment,
    teardown_databases,
)

from bench import (  # noqa: E402
    chart_scenarios,
    fleet_scenarios,
    lease_scenarios,
    openstack_scenarios,
    pool_scenarios,
    qemu_scenarios,
    scenarios,
    scheduling_scenarios,
    serve_scenarios,
    snapshot_scenarios,
    sync_scenarios,
    web_scenarios,
)

# Every scenario, in the order they run (each module's docstring says what it measures).
SCENARIOS = [
    scenarios.restriction,
    scenarios.list_endpoints,
    scenarios.power_state_sync,
    scenarios.job_overhead,
    scenarios.event_latency,
    pool_scenarios.pool_allocation,
    pool_scenarios.pool_monitor,
    pool_scenarios.pool_refill,
    serve_scenarios.served_allocation,
    openstack_scenarios.nova_server_create,
    qemu_scenarios.real_guests,
    qemu_scenarios.cloud_image_boot,
    qemu_scenarios.images_from_vms,
    snapshot_scenarios.real_snapshots,
    sync_scenarios.sharded_sync,
    fleet_scenarios.remote_hosts,
    web_scenarios.open_pages,
    lease_scenarios.lease_capacity_check,
    scheduling_scenarios.placement_decision,
    scheduling_scenarios.balancer_cycle,
    chart_scenarios.host_day_chart,
    chart_scenarios.cluster_day_chart,
    chart_scenarios.vm_day_chart,
    chart_scenarios.host_month_chart,
    chart_scenarios.cluster_month_chart,
    chart_scenarios.vm_month_chart,
]

logging.getLogger("django-q").setLevel(logging.WARNING)


def measure(fn, repeat: int = 5) -> tuple[float, int]:
    """Median milliseconds and the query count of one call of ``fn``."""
    fn()  # warm caches (content types, roles)
    times = []
    queries = 0
    for _ in range(repeat):
        # The query log keeps at most 9,000 entries; once full its length no longer grows, so
        # a capture taken after earlier scenarios filled it would count nothing.
        reset_queries()
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000)
        queries = len(ctx.captured_queries)
    return statistics.median(times), queries


def main() -> None:
    setup_test_environment()
    old_config = setup_databases(verbosity=0, interactive=False)
    rows = []
    try:
        only = set(sys.argv[1:])
        part = os.environ.get("BENCH_ONLY", "")
        for scenario in SCENARIOS:
            if (not only or scenario.__name__ in only) and part in scenario.__name__:
                rows.extend(scenario(measure))
    finally:
        from project.events import stop_listener

        stop_listener()
        teardown_databases(old_config, verbosity=0)
    vendor = connection.vendor
    print(f"Corral benchmarks ({vendor}, {os.cpu_count()} CPUs)")
    headers = ("benchmark", "figure", "goal", "met")
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(4)]
    line = "  ".join("-" * w for w in widths)
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print(line)
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
