"""The admin console's dashboard: the figures an operator watches, each counted over what the
admin may see and linking to the filtered list it counts.

Each app registers its sections (``register`` from its ``AppConfig.ready()``): a template and
a function computing its figures, shown when the admin may view the section's model. A fixed
number of queries whatever the number of rows: one per figure group, plus the permission
checks that decide which groups to show. ``project`` itself shows the alerts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.db.models import Count
from django.urls import reverse
from django.utils import timezone

from project.events import visible_events
from project.models import Event, EventKind

ALERT_WINDOW = timedelta(hours=24)
SHOWN_ALERTS = 5


@dataclass
class Figure:
    key: str
    label: str
    count: int
    url: str


@dataclass(frozen=True)
class Section:
    """One group of figures: shown to admins who may view ``model_label`` objects. A ``live``
    section is computed again at each refresh of the dashboard (every change, every 15 s);
    the others only with the page (they keep themselves current, as charts of the day read
    again each minute do)."""

    key: str
    model_label: str
    template: str
    compute: Callable[[Any, datetime], Any]
    rank: int
    live: bool = True


_sections: dict[str, Section] = {}


def register(
    key: str,
    *,
    model_label: str,
    template: str,
    compute: Callable[[Any, datetime], Any],
    rank: int,
    live: bool = True,
) -> None:
    """Show a section on the dashboard; ``compute(request, now)`` gives what its template shows
    as ``figures`` (of what ``request.user`` may see, as the page's query asks). Sections
    appear by ``rank``, the live ones first."""
    _sections[key] = Section(key, model_label, template, compute, rank, live)


def changelist(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def by_status(queryset, choices, url: str) -> list[Figure]:
    counts = dict(queryset.order_by().values_list("status").annotate(n=Count("pk")))
    return [
        Figure(value, label, counts.get(value, 0), f"{url}?status__exact={value}")
        for value, label in choices
    ]


def _may_view(request, site, model) -> bool:
    return site.is_registered(model) and site.get_model_admin(model).has_view_permission(request)


def dashboard(request, site, *, live: bool = True) -> list[dict]:
    """Every live section the admin may see (or, with ``live=False``, every other), in order,
    with its figures."""
    now = timezone.now()
    shown = []
    for section in sorted(_sections.values(), key=lambda s: s.rank):
        if section.live != live:
            continue
        if _may_view(request, site, apps.get_model(section.model_label)):
            shown.append(
                {
                    "key": section.key,
                    "template": section.template,
                    "figures": section.compute(request, now),
                }
            )
    return shown


def alerts(request, now) -> dict:
    """Alerts of the last day: how many, and the latest few."""
    found = visible_events(request.user).filter(
        kind=EventKind.ALERT, created_at__gte=now - ALERT_WINDOW
    )
    latest = list(found.order_by("-id")[:SHOWN_ALERTS])
    count = len(latest) if len(latest) < SHOWN_ALERTS else found.count()
    return {
        "count": count,
        "url": f"{changelist(Event)}?kind__exact={EventKind.ALERT}&age=24h",
        "latest": latest,
    }
