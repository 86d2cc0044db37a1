"""Trusting the SSH host keys hosts offer, from the admin console: one host from its page's
button, or the hosts selected in the list (the action "Trust the SSH host keys they offer",
for an upgrade that left every qemu+ssh host waiting for its key to be trusted).

The action shows a confirmation page listing each selected host with the SHA-256 fingerprint
of the key it offers, or why it is left out (``sshtrust.offered_keys``); confirming trusts
exactly those fingerprints, each host on its own as its page's button does
(``sshtrust.trust_offered_key``): a host whose key changed in between is refused, not trusted.
Each trust is in the admin's history (LogEntry) and the event feed.
"""

from __future__ import annotations

from dataclasses import replace

from django.contrib import admin, messages
from django.http import Http404
from django.shortcuts import redirect
from django.template.response import TemplateResponse

from hosts import sshtrust
from hosts.models import Host
from project.access.permissions import holds, restrict
from project.errors import Refused

CHANGE = "hosts.change_host"
SHOWN = "fingerprint_{}"  # the confirmation page's field holding the fingerprint it showed
NOT_YOURS = "you may not change this host"


def trust(model_admin, request, host: Host, shown: str, *, replacing: str | None = None) -> Host:
    """Trust the key ``host`` offers if its fingerprint is ``shown`` (``Refused`` if not),
    recorded in the admin's history as well as the event feed."""
    host = sshtrust.trust_offered_key(host, shown, by=request.user, replacing=replacing)
    model_admin.log_change(request, host, f"Trusted the SSH host key {shown}.")
    return host


def trust_host_key_view(model_admin, request, host_id: int):
    """POST from the host's page: trust the key it offers, if it is still the one shown."""
    host = restrict(Host.objects.all(), request.user, "hosts.view_host").filter(pk=host_id)
    host = host.first()
    if host is None:
        raise Http404
    back = redirect("admin:hosts_host_change", host.pk)
    if request.method != "POST" or not holds(request.user, CHANGE, host):
        model_admin.message_user(request, f"You may not change host {host.name}.", messages.ERROR)
        return back
    try:
        host = trust(model_admin, request, host, request.POST.get("trust_fingerprint", ""))
    except Refused as exc:
        model_admin.message_user(request, exc.message, messages.ERROR)
        return back
    model_admin.message_user(
        request,
        f"Corral trusts {sshtrust.fingerprint(host.ssh_host_key)} for host {host.name} and "
        "connects at its next sync.",
        messages.SUCCESS,
    )
    return back


@admin.action(description="Trust the SSH host keys they offer", permissions=["change"])
def trust_offered_host_keys(model_admin, request, queryset):
    """The list's action: a confirmation page first, then (its form posted back with
    ``post``) trust what it showed."""
    selected = Host.objects.filter(pk__in=queryset.values("pk"))  # without the list's figures
    hosts = list(selected.select_related("cluster").order_by("cluster__name", "name"))
    yours = set(restrict(selected, request.user, CHANGE).values_list("pk", flat=True))
    if request.POST.get("post") == "yes":
        _trust_shown(model_admin, request, hosts, yours)
        return None
    listed = [
        item
        if not item.fingerprint or item.host.pk in yours
        else replace(item, fingerprint="", skipped=NOT_YOURS)
        for item in sshtrust.offered_keys(hosts)
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Trust the SSH host keys they offer",
        "opts": Host._meta,
        "to_trust": [item for item in listed if item.fingerprint],
        "skipped": [item for item in listed if not item.fingerprint],
        "action": "trust_offered_host_keys",
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/hosts/host/trust_host_keys.html", context)


def _trust_shown(model_admin, request, hosts: list[Host], yours: set[int]) -> None:
    """Trust each host's key whose fingerprint the confirmation page showed, as a first key
    only (a host trusting another since is refused, as is one offering another key now)."""
    trusted = []
    for host in hosts:
        shown = request.POST.get(SHOWN.format(host.pk), "")
        if not shown:
            continue
        if host.pk not in yours:
            model_admin.message_user(
                request, f"You may not change host {host.name}.", messages.ERROR
            )
            continue
        try:
            trust(model_admin, request, host, shown, replacing="")
        except Refused as exc:
            model_admin.message_user(
                request, f"Host {host.name} was not trusted: {exc.message}", messages.ERROR
            )
            continue
        trusted.append(f"{host.name} ({shown})")
    if trusted:
        model_admin.message_user(
            request,
            f"Corral trusts the SSH host keys of {', '.join(trusted)} and connects to them at "
            "their next sync.",
            messages.SUCCESS,
        )
