"""The admin pages that draw their object's last day, week or month (a host's, a cluster's, a
VM's): the charts on the object's page over the span its query asks for (``?span=week``,
``hosts.spans``) and the fragment the page reads again every minute or when another span is
picked (``…/<id>/day-charts/?span=week``, a 404 for an object the admin may not see, a 400
for a span unknown), in one place."""

from __future__ import annotations

from django.http import Http404
from django.urls import path, reverse

from hosts import spans


class DayChartsAdmin:
    """Mixed into a ModelAdmin: ``draw_span(obj, span)`` gives the object's charts as HTML,
    and ``day_charts_key`` names them in the page (``<key>-day-charts``)."""

    day_charts_key = ""

    def draw_span(self, obj, span: spans.Span) -> str:
        raise NotImplementedError

    def _day_charts_name(self) -> str:
        return f"{self.opts.app_label}_{self.opts.model_name}_day_charts"

    def day_charts_urls(self) -> list:
        return [
            path(
                "<int:object_id>/day-charts/",
                self.admin_site.admin_view(self.day_charts_view),
                name=self._day_charts_name(),
            )
        ]

    def day_charts_view(self, request, object_id: int):
        """The object's charts alone, for its page to show the latest minutes or another
        span."""
        obj = self.get_object(request, str(object_id))
        if obj is None or not self.has_view_permission(request, obj):
            raise Http404
        return spans.fragment(request, lambda span: self.draw_span(obj, span))

    def day_charts_context(self, request, obj) -> dict:
        """What ``admin/hosts/_day_charts.html`` reads on the page of ``obj`` (the page's
        object, None for none): nothing for an object the admin may not see."""
        if obj is None or not self.has_view_permission(request, obj):
            return {}
        span = spans.on_page(request)
        url = reverse(f"admin:{self._day_charts_name()}", args=[obj.pk])
        return {
            "day_charts": spans.box(self.day_charts_key, url, span, self.draw_span(obj, span)),
            "day_charts_key": self.day_charts_key,
        }
