"""Portal pages that reach a guest: its screen in noVNC and its serial terminal in xterm.js
(each opened with a one-time ticket), and the tail of its serial console. Only for those who
may operate the VM; others get a 404."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from hosts.guests import consoles
from hosts.guests.terminal_text import plain_text
from hosts.models import ConsoleLog, VirtualMachine
from hosts.views import vm_out_of_reach
from project.errors import Refused
from project.permissions import restrict


def _operable(user, vm_id: int) -> VirtualMachine:
    vms = restrict(VirtualMachine.objects.select_related("host"), user, consoles.OPERATE)
    return get_object_or_404(vms, pk=vm_id)


@require_http_methods(["GET", "POST"])
@login_required
def vm_console(request, vm_id: int):
    """The VM's screen: a ticket issued now (POST, the VM page's Console button), redeemed by
    the page's websocket. A GET (the console's address reloaded or typed) issues nothing and
    leads to the VM page; a VM one may not operate is a 404 whatever the method."""
    vm = _operable(request.user, vm_id)
    if request.method == "GET":
        return redirect("portal:vm", vm_id=vm.pk)
    try:
        ticket, expires_at = consoles.issue_ticket(vm, request.user)
    except Refused as refused:
        messages.error(request, refused.message)
        return redirect("portal:vm", vm_id=vm.pk)
    scheme = "wss" if request.is_secure() else "ws"
    url = f"{scheme}://{request.get_host()}/ws/console/{ticket}/"
    context = {"vm": vm, "url": url, "expires_at": expires_at, "section": "vms"}
    response = render(request, "portal/console.html", context)
    response["Cache-Control"] = "no-store"  # the ticket is single use: never from a cache
    return response


@require_http_methods(["GET", "POST"])
@login_required
def vm_terminal(request, vm_id: int):
    """The VM's serial terminal: a ticket issued now (POST, the VM page's Terminal button),
    redeemed by the page's websocket; a GET leads to the VM page, as the console's does."""
    vm = _operable(request.user, vm_id)
    if request.method == "GET":
        return redirect("portal:vm", vm_id=vm.pk)
    try:
        ticket, expires_at = consoles.issue_serial_ticket(vm, request.user)
    except Refused as refused:
        messages.error(request, refused.message)
        return redirect("portal:vm", vm_id=vm.pk)
    scheme = "wss" if request.is_secure() else "ws"
    url = f"{scheme}://{request.get_host()}/ws/serial/{ticket}/"
    context = {"vm": vm, "url": url, "expires_at": expires_at, "section": "vms"}
    response = render(request, "portal/terminal.html", context)
    response["Cache-Control"] = "no-store"  # the ticket is single use: never from a cache
    return response


@require_GET
@login_required
def vm_console_log(request, vm_id: int):
    """The serial console's tail as last copied from the host (for the VM page); a VM gone
    out of reach sends the page on, as its other refreshes do."""
    try:
        vm = _operable(request.user, vm_id)
    except Http404:
        return vm_out_of_reach(request)
    log = ConsoleLog.objects.filter(vm=vm).first()
    # The text as the guest wrote it, for the page's script to render like a terminal (as
    # JSON in an attribute: htmx drops <script> elements from what it swaps in, and JSON
    # escapes the control characters), and without its escape sequences for a page without
    # scripts.
    text = log.text if log else ""
    context = {"vm": vm, "log": log, "text": json.dumps(text), "plain": plain_text(text)}
    return render(request, "portal/_console_log.html", context)
