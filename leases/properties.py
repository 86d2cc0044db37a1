"""Host properties a reservation asks for: how they are stored, read from Blazar's expressions,
checked, compared with a host and written back as an expression.

Stored as a map of property name to either a single value, compared with the default operator
(at least, for the host's ``cpus`` and ``memory_mb``; equal, for a capability), or an object
of operators and operands: ``{"cpus": 16, "gpu": "a100", "zone": {"in": ["a", "b"]},
"ram_gb": {">": 64, "<=": 256}}``. Leases stored before operators existed hold only the first
form, which keeps its meaning.

Comparisons follow the values: numbers as numbers (``"10" > "9"``, whether typed as numbers or
as text, as Blazar's clients send them), true/false as booleans, anything else as text; ``in``
is equality with any item of a list. A host without the property never matches a term about
it, whatever the operator (Blazar's rule).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation

from django.core.exceptions import ValidationError

from project.json_input import MAX_PROPERTY_NAME, SCALARS

# The properties a hypervisor reports (Blazar's hypervisor_properties); any other property is
# one of the host's capabilities (Blazar's resource_properties).
HYPERVISOR_PROPERTIES = ("cpus", "memory_mb")
OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "in")
# Blazar's names for what a hypervisor reports.
EXPRESSION_NAMES = {"$vcpus": "cpus", "$cpus": "cpus", "$memory_mb": "memory_mb"}
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_WHOLE_NUMBER = re.compile(r"[0-9]{1,15}")
MAX_LIST = 100


def default_operator(name: str) -> str:
    return ">=" if name in HYPERVISOR_PROPERTIES else "=="


def terms(name: str, constraint) -> list[tuple[str, object]]:
    """The (operator, operand) pairs one stored property stands for."""
    if isinstance(constraint, dict):
        return sorted(constraint.items(), key=lambda item: OPERATORS.index(item[0]))
    return [(default_operator(name), constraint)]


def canonical(name: str, operations: dict) -> object:
    """A property's operations as stored: a single value when it is the default operator."""
    if len(operations) == 1:
        ((operator, operand),) = operations.items()
        if operator == default_operator(name):
            return operand
    return dict(operations)


# -- checking --------------------------------------------------------------------------------


def _operand_error(name: str, operator: str, operand) -> str | None:
    """Why ``operand`` cannot follow ``operator`` for ``name`` (None: it can)."""
    if operator == "in":
        if not isinstance(operand, list) or not operand or len(operand) > MAX_LIST:
            return f"{name!r}: in takes a list of 1 to {MAX_LIST} values."
        for item in operand:
            error = _operand_error(name, "==", item)
            if error:
                return error
        return None
    if not isinstance(operand, SCALARS):
        hint = "; use in for a list" if isinstance(operand, list) else ""
        return (
            f"{name!r}: {operator} compares with one value (text, a number, true or false){hint}."
        )
    if name in HYPERVISOR_PROPERTIES and whole_number(operand) is None:
        return f"{name} needs a whole number."
    return None


def validate_host_properties(value) -> None:
    """The stored shape (a model field validator): names, operators and operands."""
    if not isinstance(value, dict):
        raise ValidationError('Use an object of name: value, like {"gpu": "a100"}.')
    for name, constraint in value.items():
        if not name or len(name) > MAX_PROPERTY_NAME:
            raise ValidationError(
                f"A property name has 1 to {MAX_PROPERTY_NAME} characters.", code="name"
            )
        if isinstance(constraint, dict):
            if not constraint:
                raise ValidationError(f"{name!r}: give at least one operator.", code="operator")
            operations = constraint.items()
        elif isinstance(constraint, SCALARS):
            operations = [(default_operator(name), constraint)]
        else:
            raise ValidationError(
                f"{name!r} must be a single value (text, a number, true or false) or an object "
                'of operators, like {"in": ["a100", "h100"]} or {">": 64}.',
                code="not_scalar",
            )
        for operator, operand in operations:
            if operator not in OPERATORS:
                raise ValidationError(
                    f"{name!r}: {str(operator)[:20]!r} is not an operator; use "
                    f"{', '.join(OPERATORS)}.",
                    code="operator",
                )
            error = _operand_error(name, operator, operand)
            if error:
                raise ValidationError(error, code="operand")


def whole_number(value) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value.strip()):
        return int(value)
    return None


def normalized(properties: dict) -> dict:
    """Validated properties with the host's ``cpus`` and ``memory_mb`` as whole numbers and
    each property in its stored form (ValidationError naming what is wrong)."""
    validate_host_properties(properties)
    result = {}
    for name, constraint in properties.items():
        operations = dict(terms(name, constraint))
        if name in HYPERVISOR_PROPERTIES:
            operations = {
                op: [whole_number(v) for v in operand] if op == "in" else whole_number(operand)
                for op, operand in operations.items()
            }
        result[name] = canonical(name, operations)
    return result


# -- Blazar's expressions ----------------------------------------------------------------------


def from_expression(expression, found: dict[str, dict] | None = None) -> dict[str, dict]:
    """Property name -> {operator: operand} from Blazar's expression (``["and", [">=",
    "$vcpus", "16"], ["in", "$zone", ["a", "b"]]]``); ValidationError says what is wrong.
    Nesting is bounded by the JSON limits of whoever decoded it."""
    found = {} if found is None else found
    if not isinstance(expression, list) or not expression:
        raise ValidationError("Expected [op, $name, value].")
    operator = expression[0]
    if operator == "and":
        for part in expression[1:]:
            from_expression(part, found)
        return found
    name = expression[1] if len(expression) == 3 else None
    if operator not in OPERATORS or not isinstance(name, str) or not name.startswith("$"):
        raise ValidationError(
            f"Unsupported expression {expression!r}: use and of terms with ==, !=, <, <=, >, "
            ">= or in."
        )
    name = EXPRESSION_NAMES.get(name, name[1:])
    operations = found.setdefault(name, {})
    if operator in operations:
        raise ValidationError(f"{name!r}: {operator} is given twice.")
    error = _operand_error(name, operator, expression[2])
    if error:
        raise ValidationError(error)
    operations[operator] = expression[2]
    return found


def expression(properties: dict) -> str:
    """Properties as Blazar's expression text ("" for none), which reads back into the same
    properties. Hypervisor properties' operands are written as text, as Blazar's clients do."""
    written = []
    for name in sorted(properties):
        label = "$vcpus" if name == "cpus" else f"${name}"
        for operator, operand in terms(name, properties[name]):
            if name in HYPERVISOR_PROPERTIES:
                operand = [str(v) for v in operand] if operator == "in" else str(operand)
            written.append([operator, label, operand])
    if not written:
        return ""
    return json.dumps(written[0] if len(written) == 1 else ["and", *written])


# -- matching a host -------------------------------------------------------------------------

_MISSING = object()


def _comparable(value) -> tuple[str, object] | None:
    """(kind, value) for comparing: numbers (from numbers or numeric text), booleans (from
    true/false in any case), text."""
    if isinstance(value, bool):
        return "bool", value
    if isinstance(value, int | float):
        value = str(value)
        if not _NUMBER.fullmatch(value):
            return None  # inf, nan
        return "number", Decimal(value)
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.fullmatch(text):
            try:
                return "number", Decimal(text)
            except InvalidOperation:  # pragma: no cover - the pattern only lets numbers in
                return "text", value
        if text.lower() in ("true", "false"):
            return "bool", text.lower() == "true"
        return "text", value
    return None


def compare(actual, operator: str, operand) -> bool:
    """Whether a host's value satisfies one term."""
    if operator == "in":
        return any(compare(actual, "==", item) for item in operand)
    left, right = _comparable(actual), _comparable(operand)
    if left is None or right is None or left[0] != right[0]:
        return operator == "!="  # values of different kinds are never equal, nor ordered
    a, b = left[1], right[1]
    if operator == "==":
        return a == b
    if operator == "!=":
        return a != b
    if left[0] == "bool":
        return False  # true and false have no order
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[operator]


def matches(host, properties: dict | None) -> bool:
    """Whether a host offers what a reservation asks: every term of every property holds for
    the host's ``cpus``/``memory_mb`` or its capability of that name."""
    for name, constraint in (properties or {}).items():
        if name in HYPERVISOR_PROPERTIES:
            actual = getattr(host, name)
        else:
            actual = (host.capabilities or {}).get(name, _MISSING)
        if actual is _MISSING or actual is None:
            return False
        if not all(compare(actual, op, operand) for op, operand in terms(name, constraint)):
            return False
    return True
