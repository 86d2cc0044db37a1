"""The rule for names of clusters, hosts, templates, VMs and pools (they become libvirt names)."""

from django.core.validators import RegexValidator

validate_object_name = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
    "Use letters, digits, '.', '_' and '-', starting with a letter or digit (at most 64).",
)
