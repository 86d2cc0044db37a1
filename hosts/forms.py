"""Portal forms of the inventory: a VM's settings, an image of a VM."""

from django import forms

from hosts.models import ImageVisibility
from project.names import validate_object_name

HIGHLY_AVAILABLE_CHOICES = [
    ("on", "On: restart it on another host once its host is confirmed down"),
    ("off", "Off: leave it down with its host"),
]


class VmSettingsForm(forms.Form):
    """What a user who may change a VM sets on its page: whether it is highly available."""

    highly_available = forms.TypedChoiceField(
        label="High availability",
        choices=HIGHLY_AVAILABLE_CHOICES,
        coerce=lambda value: value == "on",
        widget=forms.RadioSelect,
        error_messages={"required": "Say whether the VM is highly available."},
    )


class VmImageForm(forms.Form):
    """An image of a VM's disk, asked for on its page by its holder or who may operate it."""

    name = forms.CharField(
        max_length=64,
        validators=[validate_object_name],
        error_messages={"required": "Name the image."},
    )
    visibility = forms.ChoiceField(
        choices=[
            (value, label)
            for value, label in ImageVisibility.choices
            if value != ImageVisibility.PUBLIC  # the admins' (hosts.image_access)
        ],
        initial=ImageVisibility.PRIVATE,
    )
    description = forms.CharField(max_length=2000, required=False)
