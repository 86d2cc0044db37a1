"""The admin console's users screen: Django's, with usernames unique regardless of case and
every change to a user needing a system-wide grant, as in the API."""

from django.contrib import admin
from django.contrib.auth import admin as auth_admin
from django.contrib.auth import forms as auth_forms
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from project.access.accounts import check_username_free
from project.access.permissions import holds_at_system

User = get_user_model()


class UsernameIgnoringCaseMixin:
    """A user form whose username may not equal another user's but for case."""

    def clean_username(self):
        username = self.cleaned_data.get("username")
        if username:
            try:
                check_username_free(username, other_than=self.instance)
            except ValidationError as exc:
                raise ValidationError(exc.message_dict["username"], code="username_taken") from None
        return username


class UserCreationForm(UsernameIgnoringCaseMixin, auth_admin.AdminUserCreationForm):
    pass


class UserChangeForm(UsernameIgnoringCaseMixin, auth_forms.UserChangeForm):
    pass


admin.site.unregister(User)


@admin.register(User)
class UserAdmin(auth_admin.UserAdmin):
    """Users, for whoever holds the user actions on the whole system.

    Django's own screen asks whether the action is held anywhere; a user is not inside any
    cluster or pool, so only a system-wide grant reaches users (a SuperUser role on one
    cluster does not let its holder change accounts, nor rename themselves).
    """

    form = UserChangeForm
    add_form = UserCreationForm

    def has_module_permission(self, request):
        return self.has_view_permission(request)

    def has_view_permission(self, request, obj=None):
        return holds_at_system(request.user, "auth.view_user") or self.has_change_permission(
            request, obj
        )

    def has_add_permission(self, request):
        return holds_at_system(request.user, "auth.add_user")

    def has_change_permission(self, request, obj=None):
        return holds_at_system(request.user, "auth.change_user")

    def has_delete_permission(self, request, obj=None):
        return holds_at_system(request.user, "auth.delete_user")
