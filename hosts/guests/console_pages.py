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
from project.access.permissions import restrict
from project.errors import Refused


def _operable(user, vm_id: int) -> VirtualMachine:
    vms = restrict(VirtualMachine.objects.select_related("host"), user, consoles.OPERATE)
    return get_object_or_404(vms, pk=vm_id)


def _ticket_page(request, vm_id: int, issue, websocket: str, template: str):
    """A console page of the VM: a ticket issued now (``issue``, on the VM page's button's
    POST) and the page whose websocket redeems it at ``/ws/<websocket>/<ticket>/``. A GET (the
    page's address reloaded or typed) issues nothing and leads to the VM page; a VM one may not
    operate is a 404 whatever the method."""
    vm = _operable(request.user, vm_id)
    if request.method == "GET":
        return redirect("portal:vm", vm_id=vm.pk)
    try:
        ticket, expires_at = issue(vm, request.user)
    except Refused as refused:
        messages.error(request, refused.message)
        return redirect("portal:vm", vm_id=vm.pk)
    url = consoles.ticket_url(request, websocket, ticket)
    context = {"vm": vm, "url": url, "expires_at": expires_at, "section": "vms"}
    response = render(request, template, context)
    response["Cache-Control"] = "no-store"  # the ticket is single use: never from a cache
    return response


@require_http_methods(["GET", "POST"])
@login_required
def vm_console(request, vm_id: int):
    """The VM's screen in noVNC (the VM page's Console button)."""
    return _ticket_page(request, vm_id, consoles.issue_ticket, "console", "portal/console.html")


@require_GET
def console_by_ticket(request):
    """The screen a one-time ticket opens (``?token=``), with no log-in: the URL a client of
    another API hands its user (Nova's ``remote-consoles``). Rendering it does not use the
    ticket; its websocket does. An unknown, used or expired ticket is a 404."""
    ticket = consoles.waiting_ticket(request.GET.get("token", ""))
    if ticket is None:
        raise Http404
    url = consoles.ticket_url(request, "console", request.GET["token"])
    context = {"vm": ticket.vm, "url": url, "expires_at": ticket.expires_at, "section": "vms"}
    response = render(request, "portal/console.html", context)
    response["Cache-Control"] = "no-store"
    return response


@require_http_methods(["GET", "POST"])
@login_required
def vm_terminal(request, vm_id: int):
    """The VM's serial terminal in xterm.js (the VM page's Terminal button)."""
    return _ticket_page(
        request, vm_id, consoles.issue_serial_ticket, "serial", "portal/terminal.html"
    )


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
