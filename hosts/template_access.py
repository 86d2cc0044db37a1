"""Who sees, makes, manages and uses a template: the admins' templates as their grants say, and
users' own templates, private to their owner and the admins of their cluster.

- An admins' template (no owner) is used by everyone who may use templates where it is offered
  (``hosts.view_template``) while public; a private one only by the admins of its scope (those
  a deleted user left in use).
- Whoever may create VMs in a cluster (``image_access.may_create_vms``) makes templates of their
  own there, from images they may see: private, in that cluster only (a template for every
  cluster stays the admins'). They change and delete them; the admins of the cluster
  (``hosts.change_template`` there) see and manage them all.
- For everyone else a user's template does not exist: a 404 in the API and Nova, no choice in a
  form. ``visible`` is registered as the templates' view rule (``register_view_rule``), so the
  API's lists and related fields, its filters and the admin console's lists and choices read
  templates through it; the lease launch form and Nova's flavors call it.
- A VM is made from a user's template only while its maker may see every image it boots
  (``launch_refusal``): the owner of a shared image may stop sharing it.
"""

from __future__ import annotations

from django.db import router
from django.db.models import Q, QuerySet
from django.db.models.deletion import Collector, ProtectedError, RestrictedError

from hosts import image_access
from hosts.models import Cluster, Image, Template, TemplateVisibility, VirtualMachine
from project.access.permissions import grant_condition, holds, is_unprivileged


def visible(user, queryset: QuerySet | None = None) -> QuerySet:
    """The templates ``user`` may see and make VMs from."""
    queryset = Template.objects.all() if queryset is None else queryset
    if is_unprivileged(user):
        return queryset.none()
    if user.is_superuser:
        return queryset
    return queryset.filter(
        Q(owner=user)
        | (
            Q(visibility=TemplateVisibility.PUBLIC)
            & grant_condition(Template, user, "hosts.view_template")
        )
        | grant_condition(Template, user, "hosts.change_template")
    )


def owned_by(user, queryset: QuerySet | None = None) -> QuerySet:
    """``user``'s own templates."""
    queryset = Template.objects.all() if queryset is None else queryset
    if is_unprivileged(user):
        return queryset.none()
    return queryset.filter(owner=user)


def manages(user, template: Template, verb: str = "change") -> bool:
    """Whether ``user`` may change or delete (``verb``) ``template``: its owner, or whoever
    holds the action on it (the admins of its scope)."""
    if template.owner_id is not None and template.owner_id == user.pk and user.is_active:
        return True
    return holds(user, f"hosts.{verb}_template", template)


def owner_of_new(user, cluster: Cluster | None, *, own: bool = False):
    """Who owns the template ``user`` makes in ``cluster`` (none: every cluster): nobody (the
    admins', as every template was before users had their own) when they may add templates
    there, unless ``own`` asks for one of their own; ``user`` when they may create VMs there
    (or, for every cluster, somewhere: the template's validation then asks for a cluster).
    None also when they may do neither, or when an admin asks for a template for every cluster
    without the grant for it: the create is refused as before."""
    if not own and holds(user, "hosts.add_template", Template(cluster=cluster)):
        return None
    if cluster is None and not own and holds(user, "hosts.add_template"):
        return None  # an admin asking for a template for every cluster: a system-wide grant
    if image_access.may_create_vms(user, cluster):
        return user
    return None


def clusters_to_make_in(user) -> QuerySet:
    """The clusters where ``user`` may make templates of their own (create VMs)."""
    if is_unprivileged(user):
        return Cluster.objects.none()
    if user.is_superuser:
        return Cluster.objects.all()
    return Cluster.objects.filter(grant_condition(Cluster, user, "hosts.add_virtualmachine"))


def move_refusal(user, stored: Template, template: Template) -> str | None:
    """Why the owner may not move their template (``stored``) into ``template``'s cluster; None
    if they may: they may create VMs there."""
    if template.cluster_id == stored.cluster_id or template.cluster_id is None:
        return None  # no cluster: the template's validation refuses it
    if image_access.may_create_vms(user, template.cluster):
        return None
    return (
        f"You may not move your template to cluster {template.cluster}: you may not create "
        "VMs there."
    )


def launch_refusal(user, vm: VirtualMachine) -> str | None:
    """Why ``user`` may not make ``vm`` (unsaved) from its template now; None if they may.

    A user's template boots only for who may see every image it boots (its disk image unless
    the VM boots its own): their owner may stop sharing one. The admins' templates offer their
    images to whoever may use them, as the images a deleted user left in use go on booting
    them."""
    template = vm.template
    if template.owner_id is None:
        return None
    booted = {template.kernel_image_id, template.initrd_image_id}
    if vm.disk_image_id is None:
        booted.add(template.disk_image_id)
    booted.discard(None)
    seen = image_access.visible(user, Image.objects.filter(pk__in=booted)).count()
    if seen == len(booted):
        return None
    return (
        f"Template {template.name} boots from an image you may not see (its owner no longer "
        "shares it with you): no VM can be made from it until they do."
    )


def in_use(template: Template) -> bool:
    """Whether anything made from ``template`` keeps it (VMs, pools): deleting it is refused."""
    collector = Collector(using=router.db_for_write(Template))
    try:
        collector.collect([template])
    except (ProtectedError, RestrictedError):
        return True
    return False


def unused_of(user) -> list[Template]:
    """``user``'s templates nothing uses: those deleting the user deletes."""
    return [template for template in owned_by(user).order_by("name") if not in_use(template)]


def user_deletion_notes(user) -> list[str]:
    """What deleting ``user`` does to their templates, for the admin's confirmation."""
    owned = list(owned_by(user).order_by("name"))
    if not owned:
        return []
    dropped = [template.name for template in owned if not in_use(template)]
    kept = [template.name for template in owned if template.name not in dropped]
    notes = []
    if dropped:
        notes.append(f"Their templates no VM or pool uses are deleted: {', '.join(dropped)}.")
    if kept:
        notes.append(
            "Their templates in use are kept, handed to the admins (no owner, private): "
            f"{', '.join(kept)}."
        )
    return notes


def release_templates_of(user) -> None:
    """Before ``user`` is deleted: delete their templates nothing uses; hand the admins those in
    use (no owner, private: their VMs and pools keep them, no one else sees them)."""
    for template in owned_by(user):
        if in_use(template):
            Template.objects.filter(pk=template.pk).update(
                owner=None, visibility=TemplateVisibility.PRIVATE
            )
        else:
            template.delete()
