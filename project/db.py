"""Query building blocks shared by the apps."""

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce


def count_of(related: QuerySet, field: str) -> Coalesce:
    """Annotate the number of ``related`` rows whose ``field`` points at the outer row.

    A correlated sub-select per count: joining two reverse relations and counting distinct
    rows would multiply them (hosts x VMs) before counting.
    """
    counted = (
        related.filter(**{field: OuterRef("pk")})
        .order_by()
        .values(field)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))
