"""Portal page of the user's tokens: list those that still work (API tokens and Keystone
log-ins'), make an API token (shown on the answer to that request only), revoke one."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from project.access import tokens


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=tokens.NAME_LENGTH,
        required=False,
        help_text="For you to tell your tokens apart, like ci-farm.",
    )


@never_cache  # the answer that shows a new token must not stay in a cache
@login_required
def api_tokens(request):
    form = TokenForm(request.POST or None)
    made = None
    if request.method == "POST" and form.is_valid():
        made, key = tokens.issue(request.user, name=form.cleaned_data["name"])
        made.token = key
        form = TokenForm()
    context = {
        "form": form,
        "made": made,
        "tokens": tokens.listed(request.user),
        "days": settings.CORRAL_API_TOKEN_DAYS,
        "section": "tokens",
    }
    status = 400 if request.method == "POST" and made is None else 200
    return render(request, "portal/api_tokens.html", context, status=status)


@require_POST
@login_required
def api_token_revoke(request, token_id: int):
    if not tokens.revoke_own(request.user, token_id):
        raise Http404
    messages.success(request, f"Token {token_id} revoked: it no longer works.")
    return redirect("portal:api-tokens")
