"""Filters for the inventory lists of the API: clusters, hosts, templates, VMs, jobs and the
domains Corral does not manage."""

import django_filters

from hosts.models import (
    Cluster,
    ExternalDomain,
    Host,
    HostStatus,
    Job,
    JobKind,
    JobState,
    Template,
    VirtualMachine,
    VmStatus,
)
from project.filters import ScopedFilterSet


class ClusterFilterSet(ScopedFilterSet):
    class Meta:
        model = Cluster
        fields = {"name": ["exact", "icontains"]}


class HostFilterSet(ScopedFilterSet):
    status = django_filters.MultipleChoiceFilter(choices=HostStatus.choices)

    class Meta:
        model = Host
        fields = {"name": ["exact", "icontains"], "cluster": ["exact"], "reservable": ["exact"]}


class TemplateFilterSet(ScopedFilterSet):
    class Meta:
        model = Template
        fields = {
            "name": ["exact", "icontains"],
            "cluster": ["exact", "isnull"],
            "os_type": ["exact"],
            "owner": ["exact", "isnull"],
            "visibility": ["exact"],
        }


class VirtualMachineFilterSet(ScopedFilterSet):
    status = django_filters.MultipleChoiceFilter(choices=VmStatus.choices)
    owner = django_filters.CharFilter(field_name="owner__username")

    class Meta:
        model = VirtualMachine
        fields = {
            "name": ["exact", "icontains"],
            "cluster": ["exact"],
            "host": ["exact", "isnull"],
            "template": ["exact"],
            "pool": ["exact", "isnull"],
            "power_state": ["exact"],
        }


class JobFilterSet(ScopedFilterSet):
    state = django_filters.MultipleChoiceFilter(choices=JobState.choices)
    kind = django_filters.MultipleChoiceFilter(choices=JobKind.choices)

    class Meta:
        model = Job
        fields = {"vm": ["exact"], "host": ["exact"]}


class ExternalDomainFilterSet(ScopedFilterSet):
    class Meta:
        model = ExternalDomain
        fields = ["host", "power_state"]
