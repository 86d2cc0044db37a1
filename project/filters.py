"""The base filter set: filters that name related objects accept only objects the caller may
see, so filtering by an invisible id answers like filtering by one that does not exist."""

import django_filters
import django_filters.rest_framework

from project.permissions import default_action, restrict


class ScopedFilterSet(django_filters.FilterSet):
    def __init__(self, data=None, queryset=None, *, request=None, **kwargs):
        super().__init__(data, queryset, request=request, **kwargs)
        user = getattr(request, "user", None)
        for filter_ in self.filters.values():
            related = getattr(filter_, "queryset", None)
            if user is None or related is None or callable(related):
                continue
            if hasattr(related.model, "grant_scopes"):
                filter_.queryset = restrict(related, user, default_action(related.model, "view"))


class ScopedFilterBackend(django_filters.rest_framework.DjangoFilterBackend):
    """Lists that only name ``filterset_fields`` get a ScopedFilterSet too."""

    filterset_base = ScopedFilterSet
