"""Making a template from a VM in the admin console (oVirt's "Make Template"): from the VM's
page, the admin names an image and a template; one job (``hosts.vm_images``) makes the image
of the VM's disk and the template from it, with the VM's CPUs, memory and disk and its
template's kernel, devices, login user and agent. The page then shows that job."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect
from django.template.response import TemplateResponse

from hosts import image_access, vm_images
from hosts.models import Image, Template, VirtualMachine
from project.access.permissions import holds, restrict
from project.errors import Refused
from project.names import validate_object_name

# A refusal's field (the service's names) -> the form's field.
FORM_FIELDS = {"name": "image_name", "template_name": "template_name", "visibility": None}


class MakeTemplateForm(forms.Form):
    image_name = forms.CharField(
        max_length=64,
        validators=[validate_object_name],
        help_text="The image of the VM's disk as it is now (a standalone qcow2).",
    )
    template_name = forms.CharField(
        max_length=64,
        validators=[validate_object_name],
        help_text="A template booting that image, with this VM's CPUs, memory and disk and its "
        "template's kernel, devices, login user and agent.",
    )


def may_make_template(user, vm: VirtualMachine) -> bool:
    """Who may: whoever may make an image of the VM and add templates and images where its
    template is offered."""
    cluster_id = vm.template.cluster_id
    return (
        vm_images.may_make_image(user, vm)
        and holds(user, "hosts.add_template", Template(cluster_id=cluster_id))
        and holds(user, "hosts.add_image", Image(cluster_id=cluster_id))
    )


def make_template_view(model_admin, request, vm_id: int):
    """The form (GET), and the job queued (POST) then shown; a 404 for a VM the admin may not
    see, a message on the VM's page for one they may not make a template of."""
    vm = restrict(VirtualMachine.objects.all(), request.user, "hosts.view_virtualmachine")
    vm = vm.select_related("template", "template__cluster").filter(pk=vm_id).first()
    if vm is None:
        raise Http404
    if not may_make_template(request.user, vm):
        model_admin.message_user(
            request, f"You may not make a template from VM {vm.name}.", messages.ERROR
        )
        return redirect("admin:hosts_virtualmachine_change", vm.pk)
    if request.method == "POST":
        form = MakeTemplateForm(request.POST)
        if form.is_valid():
            job = _queue(request, vm, form)
            if job is not None:
                model_admin.message_user(
                    request,
                    f"Job #{job.pk} makes image {form.cleaned_data['image_name']} of VM "
                    f"{vm.name}, then template {form.cleaned_data['template_name']} from it.",
                    messages.SUCCESS,
                )
                return redirect("admin:hosts_job_change", job.pk)
    else:
        form = MakeTemplateForm(
            initial={"image_name": f"{vm.name}-image", "template_name": f"{vm.name}-template"}
        )
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Make a template from VM {vm.name}",
        "opts": VirtualMachine._meta,
        "original": vm,
        "form": form,
    }
    return TemplateResponse(request, "admin/hosts/virtualmachine/make_template.html", context)


def _queue(request, vm: VirtualMachine, form: MakeTemplateForm):
    """The job, or None with the refusal on the form."""
    cluster = vm.template.cluster
    try:
        job, _image = vm_images.request_image(
            vm,
            name=form.cleaned_data["image_name"],
            requested_by=request.user,
            # Seen by the template's users, as an admin's upload is (public where offered).
            visibility=image_access.default_visibility(request.user, cluster),
            cluster=cluster,
            template=vm_images.TemplateRequest(
                name=form.cleaned_data["template_name"], cluster=cluster
            ),
        )
    except Refused as refused:
        form.add_error(FORM_FIELDS.get(refused.field or ""), refused.message)
        return None
    return job
