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

# What deleting a user does beyond Django's cascade, in words for the confirmation page: each
# is called with the user and returns sentences (apps above project register from ready()).
_deletion_notes: list = []


def register_deletion_note(notes) -> None:
    """Add ``notes(user) -> list[str]`` to what the admin's delete confirmation says."""
    _deletion_notes.append(notes)


def deletion_notes(user) -> list[str]:
    return [note for notes in _deletion_notes for note in notes(user)]


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

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        for user in objs:
            deleted.extend(f"{user.username}: {note}" for note in deletion_notes(user))
        return deleted, counts, perms_needed, protected
