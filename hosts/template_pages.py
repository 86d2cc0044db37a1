"""Portal: making a template of one's own from an image (``/images/<id>/template/``) and deleting
one (listed under My images). Validated by the API's template serializer, so the page refuses
what ``POST /api/templates/`` refuses, in the same words."""

from __future__ import annotations

import math

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models.deletion import ProtectedError
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from hosts import image_access, template_access
from hosts.api.serializers import TemplateSerializer
from hosts.models import Cluster, Image, ImageKind, Template
from hosts.models.inventory import GIB, offered_networks

# The serializer's fields the form shows; any other error is shown above the form.
FORM_FIELDS = ("name", "cluster", "vcpus", "memory_mb", "disk_gb", "networks")


class TemplateForm(forms.Form):
    name = forms.CharField(max_length=64, help_text="Unique among all templates.")
    cluster = forms.ModelChoiceField(
        queryset=Cluster.objects.none(),
        empty_label=None,
        help_text="Where your VMs of it are made: a cluster where you may create VMs.",
    )
    vcpus = forms.IntegerField(label="CPUs", min_value=1, max_value=512, initial=1)
    memory_mb = forms.IntegerField(
        label="Memory (MiB)", min_value=16, max_value=16 * 1024 * 1024, initial=1024
    )
    disk_gb = forms.IntegerField(
        label="Disk (GB)",
        min_value=1,
        max_value=64 * 1024,
        help_text="At least the size of the disk the image holds.",
    )
    networks = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Networks the cluster's hosts offer; a VM gets a NIC on each chosen.",
    )

    def __init__(self, *args, clusters, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["cluster"].queryset = clusters
        offered = set()
        for cluster in clusters:
            offered |= offered_networks(cluster.pk)
        self.fields["networks"].choices = [(name, name) for name in sorted(offered)]


def _image_for_templates(user, image_id: int) -> Image:
    """A disk image ``user`` may see; a 404 otherwise."""
    image = image_access.visible(user).filter(pk=image_id, kind=ImageKind.DISK).first()
    if image is None:
        raise Http404("No such image.")
    return image


def _clusters_for(user, image: Image):
    """Where ``user`` may make a template of ``image``: clusters where they may create VMs,
    and where the image is offered."""
    clusters = template_access.clusters_to_make_in(user).order_by("name")
    if image.cluster_id is not None:
        clusters = clusters.filter(pk=image.cluster_id)
    return clusters


def _save(request, form: TemplateForm, image: Image) -> Template | None:
    """The user's template of ``image`` as the form asks, validated and saved as the API does;
    None with the form's errors set when it is refused."""
    data = {
        **{name: form.cleaned_data[name] for name in FORM_FIELDS},
        "cluster": form.cleaned_data["cluster"].pk,
        "disk_image": image.pk,
    }
    serializer = TemplateSerializer(data=data, context={"request": request, "own": True})
    if not serializer.is_valid():
        for name, errors in serializer.errors.items():
            for error in errors:
                form.add_error(name if name in FORM_FIELDS else None, str(error))
        return None
    if serializer.unsaved_instance().owner_id != request.user.pk:
        form.add_error("cluster", "You may not create VMs in this cluster.")
        return None
    with transaction.atomic():
        return serializer.save()


@require_http_methods(["GET", "POST"])
@login_required
def template_new(request, image_id: int):
    """Make a template of one's own that boots ``image`` (a disk image the user may see), in a
    cluster where they may create VMs: private to them and the cluster's admins."""
    image = _image_for_templates(request.user, image_id)
    clusters = _clusters_for(request.user, image)
    initial = {"name": image.name, "disk_gb": max(1, math.ceil(image.virtual_size_bytes / GIB))}
    form = TemplateForm(request.POST or None, clusters=clusters, initial=initial)
    if request.method == "POST" and form.is_valid():
        template = _save(request, form, image)
        if template is not None:
            messages.success(
                request, f"Template {template.name} made: your VMs may be made from it."
            )
            return redirect("portal:images")
    context = {"section": "images", "image": image, "form": form, "may_make": clusters.exists()}
    status = 400 if request.method == "POST" else 200
    return render(request, "portal/template_form.html", context, status=status)


@require_POST
@login_required
def template_delete(request, template_id: int):
    """Delete one of the user's own templates; one VMs or pools are made from is kept."""
    template = template_access.owned_by(request.user).filter(pk=template_id).first()
    if template is None:
        raise Http404("No such template.")
    try:
        with transaction.atomic():
            template.delete()
    except ProtectedError:
        messages.error(
            request,
            f"Template {template.name} is in use (VMs or pools are made from it): it is kept.",
        )
    else:
        messages.success(request, f"Template {template.name} deleted.")
    return redirect("portal:images")
