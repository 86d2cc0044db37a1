"""List pagination shared by every API list: ``?limit=&offset=``, with a total count.

A value that is not a whole number in range is a 400 naming the parameter; DRF's own
pagination would quietly fall back to its defaults. An empty value means "not given".
"""

import re

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

# Beyond this many digits a number is no offset any list could reach.
_WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 1000

    def get_limit(self, request) -> int:
        name = self.limit_query_param
        message = f"Rows per page: a whole number from 1 to {self.max_limit}."
        limit = _whole_number(request, name, message)
        if limit is None:
            return self.default_limit
        if not 1 <= limit <= self.max_limit:
            raise ValidationError({name: [message]})
        return limit

    def get_offset(self, request) -> int:
        name = self.offset_query_param
        offset = _whole_number(request, name, "Rows to skip: a whole number, 0 or more.")
        return 0 if offset is None else offset

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": self.max_limit},
            self.offset_query_param: {"minimum": 0},
        }
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters


def _whole_number(request, name: str, message: str) -> int | None:
    value = request.query_params.get(name, "")
    if value == "":
        return None
    if not _WHOLE_NUMBER.fullmatch(value):
        raise ValidationError({name: [message]})
    return int(value)
