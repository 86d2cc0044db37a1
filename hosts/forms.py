"""Portal forms of the inventory: a VM's settings."""

from django import forms

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
