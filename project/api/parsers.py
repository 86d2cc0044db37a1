"""The API's JSON parser: DRF's, refusing what no field could take before any view sees it.

A body nested deeper than Python's recursion limit (``[[[[…``) made the standard parser raise
RecursionError, a 500; one holding a lone surrogate (``"\\ud800"``) passed and failed later
in the renderer or the database. Both are a 400 here, with the top-level field at fault when
there is one (project/json_input.py says why JSON is the only way such input arrives).
"""

from rest_framework import parsers
from rest_framework.exceptions import ParseError, ValidationError

from project.json_input import MAX_DEPTH, problem_in


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            document = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels.") from None
        problem = problem_in(document)
        if problem is None:
            return document
        if problem.field is None:
            raise ParseError(f"JSON parse error - {problem.message()}")
        raise ValidationError({problem.field: [problem.message(in_field=True)]})
