"""JSON that comes in from outside: how deep it may nest, which characters it may hold, and
which values a map of properties may take.

Every JSON request body passes ``problem_in()``: through the API's JSON parser
(project/api/parsers.py, which Nova's, Glance's and Blazar's views use too) or ``loads()``
(Keystone's bodies, JSON inside a value such as Blazar's expression strings), and so does
JSON typed into the admin console (``JSONFormField``), so nothing nested deeper than
``MAX_DEPTH`` and no lone surrogate reaches a serializer, a renderer or the database. JSON is
the only way such a character can arrive: Django decodes query strings, form fields and
multipart parts with replacement, but a JSON ``"\\ud800"`` escape decodes to a lone
surrogate, which neither UTF-8 output nor PostgreSQL can encode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django import forms
from django.core.exceptions import ValidationError
from django.utils.deconstruct import deconstructible

# Deeper than any body the API takes (a lease with Blazar expressions nests about six levels).
MAX_DEPTH = 32
SURROGATES = range(0xD800, 0xE000)
SCALARS = (str, int, float, bool)
MAX_PROPERTY_NAME = 64


@dataclass(frozen=True)
class Problem:
    """What is wrong in a JSON document, and where: ``field`` is its top-level key (None:
    the document as a whole), ``where`` the path from the top ("" when it does not matter)."""

    field: str | None
    where: str
    what: str

    def message(self, *, in_field: bool = False) -> str:
        """The message; ``in_field`` when it is shown at ``field``, which then goes unsaid."""
        where = "" if in_field and self.where == self.field else self.where
        return f"{self.what} (in {where})." if where else f"{self.what}."


def _surrogate_in(text: str) -> str | None:
    for character in text:
        if ord(character) in SURROGATES:
            return f"Surrogate characters are not allowed: U+{ord(character):X}"
    return None


def problem_in(document) -> Problem | None:
    """The first lone surrogate (in a key or a text) or level nested deeper than ``MAX_DEPTH``
    in a decoded JSON document, or None. Walks without recursion, so any depth is safe."""
    # (value, depth, top-level key, path from the top: "reservations[0].resource_type")
    pending = [(document, 0, None, "")]
    while pending:
        value, depth, field, path = pending.pop()
        if isinstance(value, str):
            if (what := _surrogate_in(value)) is not None:
                return Problem(field, path, what)
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth >= MAX_DEPTH:
            return Problem(field, "", f"Nested deeper than {MAX_DEPTH} levels")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        children = []
        for key, child in items:
            if isinstance(key, str) and (what := _surrogate_in(key)) is not None:
                # The name cannot be shown back: say which object holds it.
                return Problem(field, f"a name inside {path}" if path else "a name", what)
            top = key if depth == 0 and isinstance(value, dict) else field
            children.append((child, depth + 1, top, _join(path, key)))
        pending.extend(reversed(children))
    return None


def _join(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class NotJSON(ValueError):
    """The text is not JSON at all."""


class OutOfLimits(ValueError):
    """The text is JSON, nested too deep or holding a lone surrogate."""


def loads(text: str | bytes):
    """Decode a JSON body that no DRF parser reads (Keystone's) or JSON found inside a value
    (a Blazar expression string) under the limits of a body: NotJSON or OutOfLimits (both
    ValueErrors) saying what is wrong otherwise. The only place Corral decodes JSON that came
    from outside (tests/project/test_json_input_guard.py keeps it so)."""
    try:
        document = json.loads(text)
    except RecursionError:
        raise OutOfLimits(f"Nested deeper than {MAX_DEPTH} levels.") from None
    except ValueError:  # a UnicodeDecodeError of bytes too
        raise NotJSON("Not valid JSON.") from None
    problem = problem_in(document)
    if problem is not None:
        raise OutOfLimits(problem.message())
    return document


class JSONFormField(forms.JSONField):
    """Django's JSON form field under the same limits. Django's own raises RecursionError on
    deep nesting (a 500), and lets a lone surrogate through to the database, or back into the
    page shown with the form's errors, which cannot be encoded either."""

    def to_python(self, value):
        if self._typed(value):
            try:
                loads(value)
            except ValueError as exc:
                raise ValidationError(str(exc), code="invalid") from None
        return super().to_python(value)

    def bound_data(self, data, initial):
        if self._typed(data):
            try:
                loads(data)
            except ValueError:  # shown again as typed, next to the message
                return forms.fields.InvalidJSONInput(data)
        return super().bound_data(data, initial)

    def _typed(self, value) -> bool:
        """Whether ``value`` is JSON text as typed, not yet decoded."""
        return (
            not self.disabled
            and isinstance(value, str)
            and not isinstance(value, (forms.fields.JSONString, forms.fields.InvalidJSONInput))
            and value not in self.empty_values
        )


@deconstructible
class FlatPropertiesValidator:
    """A map of property names to single values (text, numbers, true/false): what a host
    offers and a lease asks for are compared value to value, so lists and objects cannot
    mean anything there."""

    def __call__(self, value) -> None:
        if not isinstance(value, dict):
            raise ValidationError('Use an object of name: value, like {"gpu": "a100"}.')
        for name, item in value.items():
            if not name or len(name) > MAX_PROPERTY_NAME:
                raise ValidationError(
                    f"A property name has 1 to {MAX_PROPERTY_NAME} characters.", code="name"
                )
            if not isinstance(item, SCALARS):
                raise ValidationError(
                    f"{name!r} must be a single value (text, a number, true or false), "
                    "not a list or an object.",
                    code="not_scalar",
                )

    def __eq__(self, other) -> bool:
        return isinstance(other, FlatPropertiesValidator)


validate_flat_properties = FlatPropertiesValidator()
