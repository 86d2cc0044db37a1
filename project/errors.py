"""The one way a use case says no: ``Refused``, with a stable code and words for people.

Services raise it when the rules do not allow an operation now (a pool with no free VM, a
lease that does not fit, a VM in a state it cannot start from). The API turns it into a 409
(a 400 when it names a field the caller can correct), the portal and the admin console into a
message or a form error; nothing above the services builds its own refusal.
"""

from __future__ import annotations

from project.error_codes import ErrorCode


class Refused(Exception):
    """An operation the rules refuse now. ``code`` is stable for clients (a member of the app's
    ``ErrorCode`` enum, ``project.error_codes``), ``message`` is for people; ``field`` names the
    input at fault, when there is one. ``details`` are facts a client can act on without
    reading the message (the API adds them to a 409's body beside "detail")."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        field: str | None = None,
        details: dict | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.details = details or {}

    def __str__(self) -> str:
        return self.message


def add_to_form(form, refused: Refused, field: str | None = None) -> None:
    """Show a refusal on a form: next to its field (or ``field``), else above the form."""
    form.add_error(refused.field or field, refused.message)
