"""The portal's and the admin console's log-in forms, their password check through the lockout."""

from __future__ import annotations

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from project.lockout import LockedOut, authenticate


class LockoutFormMixin:
    """An AuthenticationForm whose password check goes through the lockout; a refusal is kept
    in ``locked_out`` for the page's status (``answers_429_when_locked_out``)."""

    locked_out: LockedOut | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Sent back with the username filled in (a wrong password, say): the cursor waits in
        # the password field, where the person types next.
        if self.is_bound and self.data.get("username"):
            self.fields["username"].widget.attrs.pop("autofocus", None)
            self.fields["password"].widget.attrs["autofocus"] = True

    def clean(self):
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is not None and password:
            try:
                self.user_cache = authenticate(self.request, username, password)
            except LockedOut as locked:
                self.locked_out = locked
                raise ValidationError(str(locked), code="locked_out") from None
            if self.user_cache is None:
                raise self.get_invalid_login_error()
            self.confirm_login_allowed(self.user_cache)
        return self.cleaned_data


class LoginForm(LockoutFormMixin, AuthenticationForm):
    """The portal's log-in form."""


class AdminLoginForm(LockoutFormMixin, AdminAuthenticationForm):
    """The admin console's log-in form (staff only)."""
