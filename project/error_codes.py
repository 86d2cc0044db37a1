"""The registered codes of refusals (``project.errors.Refused``): each app lists its own in an
``ErrorCode`` enum and registers it here from its ``AppConfig.ready()``, so the API schema and
docs/error-codes.md can list every code without ``project`` importing the apps above it."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """A stable code and what it means to a client: ``NAME = "code", "meaning"``.

    A member is a ``str`` equal to its code, so it is stored, compared and sent as the code
    itself."""

    meaning: str

    def __new__(cls, value: str, meaning: str = "") -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        """(code, meaning) pairs, as a choice field and the API schema list them."""
        return [(member.value, member.meaning) for member in cls]


class ProjectErrorCode(ErrorCode):
    """Refusals of the project app: SSH keys and application credentials."""

    INVALID_KEY = "invalid_key", "The SSH public key is not one well-formed OpenSSH key."
    KEY_TYPE_REFUSED = "key_type_refused", "The SSH key's type is not one Corral accepts."
    NAME_REQUIRED = "name_required", "The SSH key has no name."
    NAME_TOO_LONG = "name_too_long", "The SSH key's name is too long."
    TOO_MANY_KEYS = "too_many_keys", "The user keeps the most SSH keys one may."
    DUPLICATE_NAME = (
        "duplicate_name",
        "The user has an SSH key or an application credential of this name already.",
    )
    DUPLICATE_KEY = "duplicate_key", "The user has added this SSH key (or its name) already."
    INVALID_NAME = "invalid_name", "The application credential's name is empty or too long."
    INVALID_DESCRIPTION = (
        "invalid_description",
        "The application credential's description is too long.",
    )
    INVALID_SECRET = "invalid_secret", "The application credential's secret is empty or too long."
    EXPIRED = "expired", "The application credential's expiration time is not in the future."
    TOO_MANY = "too_many", "The user holds the most application credentials one may."


_refusal_codes: dict[str, type[ErrorCode]] = {"project": ProjectErrorCode}


def register(app: str, codes: type[ErrorCode]) -> None:
    """List ``app``'s refusal codes (called from its ``AppConfig.ready()``)."""
    _refusal_codes[app] = codes


def refusal_codes() -> dict[str, type[ErrorCode]]:
    """Every app's refusal codes, by app, lowest layer first."""
    return dict(_refusal_codes)
