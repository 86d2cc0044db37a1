"""Portal page of the user's SSH keys: list them, add one (errors shown on the form), delete."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from project import sshkeys
from project.errors import Refused, add_to_form
from project.models import SshKey


class SshKeyForm(forms.Form):
    name = forms.CharField(max_length=64, help_text="For you to tell your keys apart.")
    public_key = forms.CharField(
        max_length=16384,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="One line, as in ~/.ssh/id_ed25519.pub.",
    )


@login_required
def ssh_keys(request):
    form = SshKeyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            key = sshkeys.add_key(
                request.user, form.cleaned_data["name"], form.cleaned_data["public_key"]
            )
        except Refused as refused:
            add_to_form(form, refused)
        else:
            messages.success(request, f"Key {key.name} added ({key.fingerprint}).")
            return redirect("portal:ssh-keys")
    keys = SshKey.objects.filter(owner=request.user).order_by("name", "pk")
    status = 400 if request.method == "POST" else 200
    context = {"form": form, "keys": keys, "section": "keys"}
    return render(request, "portal/ssh_keys.html", context, status=status)


@require_POST
@login_required
def ssh_key_delete(request, key_id: int):
    name = SshKey.objects.filter(owner=request.user, pk=key_id).values_list("name", flat=True)
    name = name.first()
    if name is None or not sshkeys.delete_key(request.user, key_id):
        raise Http404
    messages.success(request, f"Key {name} deleted.")
    return redirect("portal:ssh-keys")
