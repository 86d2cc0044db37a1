"""Validation of libvirt connection URIs, migration addresses, network names, storage paths and
kernel command lines, shared by models and the API."""

import re

from django.core.exceptions import ValidationError

from hosts.driver.uris import address_refusal, refusal

_NETWORK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def validate_libvirt_uri(value: str) -> None:
    """Accept only URIs Corral opens (``hosts.driver.uris``): no part may run a program.

    Passwords in the URI are refused too: credentials belong in SSH keys or TLS certificates.
    """
    reason = refusal(value)
    if reason is not None:
        raise ValidationError(reason, code="uri_refused")


def validate_migration_address(value: str) -> None:
    """A plain host name or IP address (``hosts.driver.uris.address_refusal``): it becomes the
    host part of libvirt's migration URI and nothing else."""
    reason = address_refusal(value)
    if reason is not None:
        raise ValidationError(reason, code="address_refused")


# The user-information part of a URI holding a password: "scheme://user:password@".
_PASSWORD_PART = re.compile(r"^(?P<scheme>[^:/?#]+://)(?P<user>[^:/?#@]*):[^/?#]*@")


def without_password(uri: str) -> str:
    """The URI with any password left out (``ssh://root:secret@h/`` -> ``ssh://root@h/``)."""

    def keep_user(match: re.Match) -> str:
        user = match["user"]
        return match["scheme"] + (f"{user}@" if user else "")

    return _PASSWORD_PART.sub(keep_user, uri, count=1)


def validate_network_names(value) -> None:
    """A list of distinct network names such as ``["default", "lab-net"]``."""
    if not isinstance(value, list):
        raise ValidationError("Networks must be a list of network names.")
    for name in value:
        if not isinstance(name, str) or not _NETWORK_NAME.match(name):
            raise ValidationError(
                f"{name!r} is not a network name (letters, digits, '.', '_' and '-', at most 64)."
            )
    if len(set(value)) != len(value):
        raise ValidationError("Each network may be listed only once.")


_STORAGE_PATH = re.compile(r"^(/[A-Za-z0-9_.-]+)+/?$")
_CMDLINE = re.compile(r"^[\x20-\x7e]*$")


def validate_storage_path(value: str) -> None:
    """An absolute folder path of plain characters (it goes into libvirt's pool XML)."""
    if not value:
        return
    if not _STORAGE_PATH.match(value) or "/../" in f"{value}/" or "/./" in f"{value}/":
        raise ValidationError(
            "Give an absolute folder path of letters, digits, '.', '_', '-' and '/', without '..'."
        )


def validate_kernel_cmdline(value: str) -> None:
    """Printable ASCII only: the command line goes into the domain XML and the guest."""
    if not _CMDLINE.match(value):
        raise ValidationError("The kernel command line may hold printable ASCII only.")


def validate_user_data(value: str) -> None:
    """cloud-init user-data: ``#cloud-config`` then a YAML mapping (Corral adds the user's keys
    to it, so it must be one it can read)."""
    import yaml

    if not value.strip():
        return
    if not value.lstrip().startswith("#cloud-config"):
        raise ValidationError("User-data must start with #cloud-config.")
    try:
        document = yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise ValidationError(f"User-data is not valid YAML: {exc}") from exc
    if document is not None and not isinstance(document, dict):
        raise ValidationError("User-data must be a YAML mapping (key: value lines).")
    keys = (document or {}).get("ssh_authorized_keys", [])
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise ValidationError("ssh_authorized_keys must be a list of keys.")


# A POSIX account name as useradd accepts it by default (Debian's NAME_REGEX, 32 at most).
_LOGIN_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
# A Linux interface name (IFNAMSIZ is 16 with its terminating NUL).
_BRIDGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$")


def validate_login_user(value: str) -> None:
    """The guest account users log in to: lower-case letters, digits, '_' and '-'."""
    if value and not _LOGIN_USER.match(value):
        raise ValidationError(
            "Give an account name such as debian, ubuntu or cloud-user: lower-case letters, "
            "digits, '_' and '-', starting with a letter or '_', at most 32."
        )


def validate_bridge_name(value: str) -> None:
    """A host bridge's interface name, such as ``br0`` (at most 15 characters)."""
    if value and not _BRIDGE_NAME.match(value):
        raise ValidationError(
            "Give a bridge's interface name such as br0: letters, digits, '.', '_' and '-', "
            "at most 15."
        )
