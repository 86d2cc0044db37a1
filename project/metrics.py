"""Prometheus metrics at ``/metrics``, computed from the database at each scrape.

Every figure is read from the database when Prometheus asks, so every web process answers
the same and nothing is kept between scrapes (no multiprocess mode). A scrape costs a fixed
number of queries whatever the number of rows. Allowed with ``Authorization: Bearer
<CORRAL_METRICS_TOKEN>`` when that setting is set, or for a logged-in user who may view
hosts system-wide; anyone else gets a 404.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.http import Http404, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from project.access.permissions import holds_at_system

RECENT = timedelta(hours=1)

# Each app's figures: a function of the scrape's time yielding metric families, registered
# from its ``AppConfig.ready()`` in the order they are exposed.
_collectors: list[Callable[[datetime], Iterable[Metric]]] = []
# The action a logged-in user must hold system-wide to read the metrics (set by the app that
# owns the hosts, whose admins watch them).
_scrape_actions: list[str] = []


def register(collect: Callable[[datetime], Iterable[Metric]]) -> None:
    """Add an app's figures to every scrape."""
    _collectors.append(collect)


def allow_scraping_with(action: str) -> None:
    """Logged-in users holding ``action`` system-wide may read the metrics."""
    _scrape_actions.append(action)


def gauge_by(
    name: str, documentation: str, label: str, values: Iterable[str], counts: dict
) -> GaugeMetricFamily:
    """One sample per known value (zero when absent), plus any value only the rows know."""
    family = GaugeMetricFamily(name, documentation, labels=[label])
    for value in dict.fromkeys([*values, *counts]):
        family.add_metric([str(value)], counts.get(value, 0))
    return family


class CorralCollector:
    """Reads the figures an operator alerts on, from every app that registered some."""

    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        for collect in _collectors:
            yield from collect(now)


registry = CollectorRegistry(auto_describe=False)
registry.register(CorralCollector())


def _may_scrape(request) -> bool:
    token = settings.CORRAL_METRICS_TOKEN
    offered = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(offered.encode(), f"Bearer {token}".encode()):
        return True
    user = request.user
    return user.is_authenticated and any(
        holds_at_system(user, action) for action in _scrape_actions
    )


@require_GET
def metrics_view(request):
    """The metrics in Prometheus' text format, for a scraper with the token or an admin."""
    if not _may_scrape(request):
        raise Http404
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
