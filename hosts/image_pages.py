"""Portal: My images (what the user owns and is offered, with their visibility, and the
templates they made of them) and the upload form, which sends the file to ``POST /api/images/``
with a progress bar (image_upload.js)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.shortcuts import render
from django.views.decorators.http import require_GET

from hosts import image_access, images, template_access
from hosts.models import ImageVisibility


@require_GET
@login_required
def my_images(request):
    """The images the user owns or was offered (shared with them), each with its visibility;
    their own templates; the upload form when they may upload."""
    user = request.user
    own = (
        image_access.visible(user)
        .filter(Q(owner=user) | Q(members__user=user) | Q(members__group__in=user.groups.all()))
        .distinct()
        .select_related("owner", "cluster")
        .order_by("name")
    )
    context = {
        "section": "images",
        "images": list(own),
        "may_upload": image_access.may_upload(user),
        "templates": list(
            template_access.owned_by(user).select_related("cluster", "disk_image").order_by("name")
        ),
        "may_make_templates": template_access.clusters_to_make_in(user).exists(),
        "visibilities": [
            (value, label)
            for value, label in ImageVisibility.choices
            if value != ImageVisibility.PUBLIC
        ],
        "limit": images.limit_text(),
    }
    return render(request, "portal/images.html", context)
