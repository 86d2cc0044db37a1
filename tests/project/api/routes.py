"""Every route under /api/ as the URL configuration has it, and every serializer of the apps'
API packages, for the tests that must reach every route: the permission matrix
(tests/project/access/) and the fuzzer (tests/security/). A route an app adds to its api/urls.py,
or a serializer to its api package, is found here without being named anywhere.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass

from django.apps import apps
from django.db.models import Model
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse
from rest_framework import serializers

METHODS = ("get", "post", "put", "patch", "delete")
# Made-up ids that fill a route's parameters (a grant's id is a letter and a number).
_MADE_UP_IDS = (
    {},
    {"pk": 1},
    {"pk": "u1"},
    {"policy_pk": 1},
    {"policy_pk": 1, "pk": 1},
    {"pk": 1, "member_id": 1},
    {"pk": 1, "sid": 1},
)
# The same, with values that stand out, to write the route as the OpenAPI schema does.
_MARKED_IDS = (
    ({}, {}),
    ({"pk": 990001}, {"990001": "{id}"}),
    ({"pk": "u990001"}, {"u990001": "{id}"}),
    ({"policy_pk": 990002}, {"990002": "{policy_pk}"}),
    ({"policy_pk": 990002, "pk": 990001}, {"990002": "{policy_pk}", "990001": "{id}"}),
    ({"pk": 990001, "member_id": 990003}, {"990001": "{id}", "990003": "{member_id}"}),
    ({"pk": 990001, "sid": 990004}, {"990001": "{id}", "990004": "{sid}"}),
)


@dataclass(frozen=True)
class ApiRoute:
    """One route: its name, where it is, its view and what each HTTP method does there."""

    name: str
    url: str  # with made-up ids: /api/vms/1/start/
    path: str  # as the OpenAPI schema writes it: /api/vms/{id}/start/
    view: type | None
    actions: dict[str, str]  # method -> the viewset's action (the method, for a plain view)

    @property
    def methods(self) -> list[str]:
        return list(self.actions)

    def label(self, method: str) -> str:
        return f"{method.upper()} {self.path}"

    def permission(self, method: str) -> str | None:
        """The permission the viewset requires for the method's action, where it says one."""
        required = getattr(self.view, "required_permission", None)
        if required is None or model_of(self.view) is None:
            return None
        return required(self.view(), self.actions[method])


def model_of(view: type | None) -> type[Model] | None:
    """The model whose rows a view serves: its queryset's, or the one it names."""
    queryset = getattr(view, "queryset", None)
    if queryset is not None:
        return queryset.model
    return getattr(view, "model", None)


def _patterns(patterns):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _patterns(pattern.url_patterns)
        elif isinstance(pattern, URLPattern):
            yield pattern


def _reverse(name: str, choices) -> str:
    for kwargs in choices:
        try:
            return reverse(name, kwargs=kwargs)
        except NoReverseMatch:
            continue
    raise AssertionError(f"Cannot build a URL for route {name!r}.")


def _schema_path(name: str) -> str:
    for kwargs, names in _MARKED_IDS:
        try:
            path = reverse(name, kwargs=kwargs)
        except NoReverseMatch:
            continue
        for value, written in names.items():
            path = path.replace(value, written)
        return path
    raise AssertionError(f"Cannot build a URL for route {name!r}.")


def _actions(pattern: URLPattern) -> dict[str, str]:
    actions = getattr(pattern.callback, "actions", None)
    if actions:
        return {method: str(actions[method]) for method in sorted(actions)}
    view = getattr(pattern.callback, "cls", None)
    return {method: method for method in METHODS if hasattr(view, method)}


@functools.cache
def api_routes() -> tuple[ApiRoute, ...]:
    """Every route under /api/, in the order the URL configuration resolves them."""
    api = next(p for p in get_resolver().url_patterns if str(p.pattern) == "api/")
    return tuple(
        ApiRoute(
            name=pattern.name,
            url=_reverse(pattern.name, _MADE_UP_IDS),
            path=_schema_path(pattern.name),
            view=getattr(pattern.callback, "cls", None),
            actions=_actions(pattern),
        )
        for pattern in _patterns(api.url_patterns)
    )


def _shape(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def route_named_by(path: str, parameter: str) -> ApiRoute | None:
    """The route whose objects fill ``{parameter}`` of a schema path: the route of the path up
    to that parameter (``/api/schedulingpolicies/{policy_pk}/`` for ``policy_pk``)."""
    marker = "{" + parameter + "}"
    head = _shape(path[: path.index(marker) + len(marker)] + "/")
    return next((route for route in api_routes() if _shape(route.path) == head), None)


@functools.cache
def api_serializers() -> tuple[type[serializers.BaseSerializer], ...]:
    """The serializers defined in the API package of each app serving part of /api/ (project
    serves the rest), request bodies of extra actions included; abstract bases left out."""
    found = []
    for config in apps.get_app_configs():
        if config.name != "project" and not getattr(config, "api_urls", None):
            continue
        package = importlib.import_module(f"{config.name}.api")
        for module_info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{module_info.name}")
            found.extend(
                value
                for value in vars(module).values()
                if inspect.isclass(value)
                and issubclass(value, serializers.BaseSerializer)
                and value.__module__ == module.__name__
                and not _abstract(value)
            )
    return tuple(found)


def _abstract(serializer: type) -> bool:
    """A model serializer naming no model: a base for the others."""
    return issubclass(serializer, serializers.ModelSerializer) and not hasattr(serializer, "Meta")


def related_fields() -> dict[str, set[tuple[type[Model], str]]]:
    """Body field -> (model, field its values are looked up by) of every writable field of the
    API's serializers that names other objects (by id, or by a name)."""
    fields: dict[str, set[tuple[type[Model], str]]] = {}
    for serializer in api_serializers():
        for name, field in serializer().fields.items():
            if isinstance(field, serializers.ManyRelatedField):
                relation = field.child_relation
            else:
                relation = field
            if field.read_only or not isinstance(relation, serializers.RelatedField):
                continue
            lookup = getattr(relation, "slug_field", "pk")
            fields.setdefault(name, set()).add((relation.queryset.model, lookup))
    return fields
