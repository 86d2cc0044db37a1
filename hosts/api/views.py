"""Inventory API: clusters, hosts, templates and VMs, restricted by role grants."""

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from hosts import jobs, services, sshtrust, template_access
from hosts.after_stop import after_stop
from hosts.api.filtersets import (
    ClusterFilterSet,
    ExternalDomainFilterSet,
    HostFilterSet,
    JobFilterSet,
    TemplateFilterSet,
    VirtualMachineFilterSet,
)
from hosts.api.serializers import (
    ClusterSerializer,
    ConsoleTicketSerializer,
    ExternalDomainSerializer,
    HostSerializer,
    JobSerializer,
    MigrateSerializer,
    SerialTicketSerializer,
    SshIdentitySerializer,
    StopJobSerializer,
    TemplateSerializer,
    TrustHostKeySerializer,
    VirtualMachineSerializer,
)
from hosts.api.snapshots import VirtualMachineSnapshots
from hosts.api.vm_images import VirtualMachineImage
from hosts.error_codes import HostErrorCode
from hosts.guests import consoles
from hosts.models import (
    Cluster,
    ConsoleLog,
    ExternalDomain,
    Host,
    Job,
    JobKind,
    JobState,
    Template,
    VirtualMachine,
)
from hosts.models.jobs import ACTIVE_JOB_STATES
from project.access.permissions import holds
from project.api.viewsets import ScopedModelViewSet, ScopedReadOnlyViewSet
from project.db import count_of
from project.errors import Refused


class ClusterViewSet(ScopedModelViewSet):
    """Clusters of hosts sharing a scheduling policy."""

    queryset = Cluster.objects.annotate(
        host_count=count_of(Host.objects.all(), "cluster"),
        vm_count=count_of(VirtualMachine.objects.all(), "cluster"),
    )
    serializer_class = ClusterSerializer
    filterset_class = ClusterFilterSet
    search_fields = ["name", "description"]
    ordering_fields = ["name", "id", "created_at"]


class HostViewSet(ScopedModelViewSet):
    """libvirt hosts. Capacity, usage and status are read from the host, not set here."""

    queryset = Host.objects.select_related("cluster")
    serializer_class = HostSerializer
    filterset_class = HostFilterSet
    search_fields = ["name", "description"]
    ordering_fields = ["name", "id", "status", "cluster"]
    action_permissions = {
        "confirm_down": "hosts.change_host",
        "trust_host_key": "hosts.change_host",
    }

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"], url_path="confirm-down")
    def confirm_down(self, request, pk=None):
        """Confirm that the NonResponsive host is down (powered off or fenced): its highly
        available VMs (every VM that ran there, when its cluster restarts VMs elsewhere) are
        started on other hosts by the job answered (202)."""
        host = self.get_object()
        job = services.confirm_down(host, requested_by=request.user)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=TrustHostKeySerializer, responses={200: HostSerializer})
    @action(detail=True, methods=["post"], url_path="trust-host-key")
    def trust_host_key(self, request, pk=None):
        """Trust the SSH host key the host offers (``ssh_host_key_offered_fingerprint``), after
        comparing its fingerprint with the host's own: give that fingerprint. 400 when it is
        not the offered key's (it changed again since), 409 when the host offers none. Corral
        connects to the host again at its next sync; the change is an event naming who."""
        host = self.get_object()
        given = TrustHostKeySerializer(data=request.data)
        given.is_valid(raise_exception=True)
        host = sshtrust.trust_offered_key(
            host, given.validated_data["fingerprint"], by=request.user
        )
        return Response(HostSerializer(host, context=self.get_serializer_context()).data)

    @extend_schema(responses={200: SshIdentitySerializer, 404: None})
    @action(detail=False, methods=["get"], url_path="ssh-identity")
    def ssh_identity(self, request):
        """Corral's own SSH public key, for the authorized_keys of the hosts it reaches over
        SSH (admins who may add or change hosts; anyone else 404)."""
        user = request.user
        if not (holds(user, "hosts.add_host") or holds(user, "hosts.change_host")):
            raise Http404
        mine = sshtrust.identity()
        return Response({"public_key": mine.public_key, "fingerprint": mine.fingerprint})


class TemplateViewSet(ScopedModelViewSet):
    """VM templates: CPUs, memory, disk, networks and OS.

    The admins' templates, and users' own: whoever may create VMs in a cluster makes templates
    there from images they may see (``owner``: them; private to them and the cluster's admins,
    a 404 for everyone else) and changes and deletes them. A template in use is not deleted
    (409)."""

    queryset = Template.objects.select_related("owner")
    serializer_class = TemplateSerializer
    filterset_class = TemplateFilterSet
    search_fields = ["name", "description"]
    ordering_fields = ["name", "id", "vcpus", "memory_mb", "disk_gb"]

    def check_object_permissions(self, request, obj) -> None:
        verb = {"update": "change", "partial_update": "change", "destroy": "delete"}.get(
            self.action
        )
        if verb is not None and not template_access.manages(request.user, obj, verb):
            raise PermissionDenied(f"You may not {verb} this template.")

    def perform_create(self, serializer) -> None:
        template = serializer.unsaved_instance()
        if template.owner_id is None:
            super().perform_create(serializer)
            return
        # A template of the caller's own: they may create VMs in its cluster (owner_of_new).
        with transaction.atomic():
            serializer.save()
        self.reload(serializer)

    def check_placement(self, serializer) -> None:
        stored = serializer.instance
        if stored.owner_id is None or stored.owner_id != self.request.user.pk:
            super().check_placement(serializer)
            return
        refusal = template_access.move_refusal(
            self.request.user, stored, serializer.unsaved_instance()
        )
        if refusal is not None:
            raise PermissionDenied(refusal)


def _operation(kind: str, description: str, *, stops: bool = False):
    """A POST action on a VM that queues ``kind`` and answers 202 with the job; with
    ``stops``, the answer also says what follows once the VM stops (``after_stop``)."""
    answer = StopJobSerializer if stops else JobSerializer

    def handler(self, request, pk=None):
        vm = self.get_object()
        job = services.request_operation(vm, kind, requested_by=request.user)
        context = {"after_stop": after_stop(vm)} if stops else {}
        return Response(answer(job, context=context).data, status=status.HTTP_202_ACCEPTED)

    handler.__name__ = kind
    # The schema goes on last: @action replaces what a decorator below it left on the function.
    schema = extend_schema(request=None, responses={202: answer}, description=description)
    return schema(action(detail=True, methods=["post"])(handler))


# Said of both stops: what may follow them.
AFTER_STOP = (
    " A VM of an automatic pool then goes back to its pool, and a stateless pool reverts its "
    "disk (everything written to it since it was taken is lost): the answer's after_stop says "
    "what follows, null when nothing does."
)


class VirtualMachineOperations:
    """The VM power operations; each returns 202 and the job that carries it out."""

    start = _operation(JobKind.START, "Start the VM (placing it on a host if needed).")
    shutdown = _operation(JobKind.SHUTDOWN, "Ask the guest to shut down." + AFTER_STOP, stops=True)
    poweroff = _operation(JobKind.POWEROFF, "Stop the VM at once." + AFTER_STOP, stops=True)
    suspend = _operation(JobKind.SUSPEND, "Pause the running VM.")
    resume = _operation(JobKind.RESUME, "Resume the paused VM.")

    @extend_schema(request=MigrateSerializer, responses={202: JobSerializer})
    @action(detail=True, methods=["post"])
    def migrate(self, request, pk=None):
        """Move the running VM to another host (chosen by Corral unless given)."""
        vm = self.get_object()
        body = MigrateSerializer(data=request.data, context=self.get_serializer_context())
        body.is_valid(raise_exception=True)
        destination = body.validated_data.get("host")
        if destination is not None and destination.cluster_id != vm.cluster_id:
            raise ValidationError({"host": "The destination must be in the VM's cluster."})
        if destination is not None and destination.pk == vm.host_id:
            raise ValidationError({"host": f"VM {vm.name} is already on {destination.name}."})
        params = {"host": destination.pk} if destination is not None else {}
        job = services.request_operation(
            vm, JobKind.MIGRATE, requested_by=request.user, params=params
        )
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class VirtualMachineConsole:
    """A VM's serial console log, its screen (VNC) and its serial terminal (websockets)."""

    @extend_schema(responses={(200, "text/plain"): OpenApiTypes.STR})
    @action(detail=True, methods=["get"], url_path="console-log")
    def console_log(self, request, pk=None):
        """The last 64 KiB of the VM's serial console, as last copied from its host."""
        vm = self.get_object()
        log = ConsoleLog.objects.filter(vm=vm).values_list("text", flat=True).first()
        return HttpResponse(log or "", content_type="text/plain; charset=utf-8")

    @extend_schema(request=None, responses={201: ConsoleTicketSerializer})
    @action(detail=True, methods=["post"])
    def console(self, request, pk=None):
        """A websocket URL that opens the VM's screen (VNC): once, within seconds, for you."""
        return self._ticket(request, consoles.issue_ticket, "console", ConsoleTicketSerializer)

    @extend_schema(request=None, responses={201: SerialTicketSerializer})
    @action(detail=True, methods=["post"], url_path="serial-console")
    def serial_console(self, request, pk=None):
        """A websocket URL that opens the VM's serial terminal: once, within seconds, for you."""
        return self._ticket(request, consoles.issue_serial_ticket, "serial", SerialTicketSerializer)

    def _ticket(self, request, issue, websocket: str, serializer):
        """201 with a one-time websocket URL issued now; a 404 for who may not operate the VM
        (they do not learn it has a console)."""
        vm = self.get_object()
        if not holds(request.user, consoles.OPERATE, vm):
            raise Http404
        ticket, expires_at = issue(vm, request.user)
        data = {"url": consoles.ticket_url(request, websocket, ticket), "expires_at": expires_at}
        return Response(serializer(data).data, status=status.HTTP_201_CREATED)


class VirtualMachineViewSet(
    VirtualMachineOperations,
    VirtualMachineConsole,
    VirtualMachineSnapshots,
    VirtualMachineImage,
    ScopedModelViewSet,
):
    """Virtual machines. ``status`` is Corral's lifecycle view, ``power_state`` the host's."""

    # Whether its keys are on their way into the guest (``guest_keys``), in the same query.
    queryset = VirtualMachine.objects.select_related("owner", "template", "host").annotate(
        keys_job_active=Exists(
            Job.objects.filter(
                vm=OuterRef("pk"), kind=JobKind.GUEST_KEYS, state__in=ACTIVE_JOB_STATES
            )
        )
    )
    serializer_class = VirtualMachineSerializer
    filterset_class = VirtualMachineFilterSet
    search_fields = ["name", "description"]
    ordering_fields = ["name", "id", "status", "cluster", "host", "created_at"]
    action_permissions = {
        "start": "hosts.operate_virtualmachine",
        "shutdown": "hosts.operate_virtualmachine",
        "poweroff": "hosts.operate_virtualmachine",
        "suspend": "hosts.operate_virtualmachine",
        "resume": "hosts.operate_virtualmachine",
        "migrate": "hosts.migrate_virtualmachine",
        "console_log": "hosts.operate_virtualmachine",
        "console": "hosts.view_virtualmachine",
        "serial_console": "hosts.view_virtualmachine",
        "image": "hosts.view_virtualmachine",
    }

    def perform_create(self, serializer):
        vm = serializer.unsaved_instance()
        self.check_create_permission(vm)
        serializer.instance = services.create_vm(vm, created_by=self.request.user)
        self.reload(serializer)

    def perform_update(self, serializer):
        # Holding a pool's VM for the admins (or releasing it) goes through its service, which
        # says so in the event feed.
        held = serializer.validated_data.pop("admin_hold", None)
        with transaction.atomic():
            services.charge_hardware(serializer.instance, serializer.validated_data)
            super().perform_update(serializer)
            if held is not None:
                services.set_admin_hold(serializer.instance, held, requested_by=self.request.user)
                self.reload(serializer)

    @extend_schema(responses={204: None, 202: JobSerializer})
    def destroy(self, request, *args, **kwargs):
        """Delete a stopped VM: 204 at once, or 202 with the job that removes it from its host."""
        vm = self.get_object()
        job = services.delete_vm(vm, requested_by=request.user)
        if job is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class JobViewSet(ScopedReadOnlyViewSet):
    """Jobs: one per operation. You see your own and those on objects you may see."""

    queryset = Job.objects.select_related("requested_by", "vm", "host").prefetch_related("journal")
    serializer_class = JobSerializer
    filterset_class = JobFilterSet
    ordering_fields = ["id", "created_at", "state", "kind"]
    action_permissions = {"cancel": "hosts.cancel_job"}

    def get_queryset(self):
        visible = super().get_queryset()
        return visible | self.queryset.filter(requested_by=self.request.user)

    def check_object_permissions(self, request, obj):
        if self.action == "cancel" and obj.requested_by_id == request.user.pk:
            return
        super().check_object_permissions(request, obj)

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel a pending job at once, or a running one at its next step."""
        job = self.get_object()
        if job.state not in (JobState.PENDING, JobState.RUNNING):
            raise Refused(
                HostErrorCode.NOTHING_TO_CANCEL,
                f"Job {job.pk} is {job.get_state_display().lower()}; nothing to cancel.",
            )
        job = jobs.request_cancel(job)
        return Response(JobSerializer(self.queryset.get(pk=job.pk)).data)


class ExternalDomainViewSet(ScopedReadOnlyViewSet):
    """Domains found on hosts that Corral does not manage (never touched)."""

    queryset = ExternalDomain.objects.select_related("host")
    serializer_class = ExternalDomainSerializer
    filterset_class = ExternalDomainFilterSet
    ordering_fields = ["name", "host", "id"]
