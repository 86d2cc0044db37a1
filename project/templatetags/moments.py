"""Template filters saying moments as people read them."""

from datetime import timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()

JUST_NOW = timedelta(minutes=1)


@register.filter
def ago(moment) -> str:
    """How long ago ``moment`` was: "just now" within the last minute (not "0 minutes ago"),
    else "5 minutes ago", "2 hours, 3 minutes ago"."""
    if moment is None:
        return ""
    if timezone.now() - moment < JUST_NOW:
        return "just now"
    return f"{timesince(moment)} ago"
