"""Server actions (``POST /servers/{id}/action``): what Corral does of Nova's, and a clear
refusal of the rest.

Power: ``os-start``, ``os-stop``, ``reboot`` (SOFT: shut down then start, HARD: power off then
start), and both of Nova's ways of holding a guest, ``pause``/``unpause`` and
``suspend``/``resume``, which are Corral's one way: the guest held in memory (Corral's
suspend and resume jobs; the server shows ``PAUSED`` either way, and either verb releases it).
Each answers Nova's 202 once its job is queued, and Nova's 409 ("Cannot 'suspend' instance …
while it is in vm_state …") when the server cannot take it from its state. Consoles:
``os-getConsoleOutput`` (the serial log) and ``os-getVNCConsole`` (the screen's URL). Images:
``createImage``, an image of its disk made by Corral's job (``services.image_of_server``).

An action Nova has and Corral does not (lock, shelve, resize, rescue…) is a 400 saying so and
what to do instead; a name Nova does not know either is Nova's own 400, "There is no such
action".
"""

from __future__ import annotations

from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response

from hosts.models import ConsoleLog, JobKind
from openstack.compute import bodies, services
from openstack.compute.base import Conflict, policy_refused
from openstack.compute.views.servers import OPERATE, ServerViews, console_url
from openstack.identity.catalog import base_url
from project.access.permissions import holds


class BadRequest(APIException):
    """Nova's 400 for an action it cannot take, its message as is (not a field's)."""

    status_code = status.HTTP_400_BAD_REQUEST


# Nova's server actions that Corral does not take: what Corral does instead.
NO_NETWORK_CHANGES = "a server's networks and addresses are its template's"
ONE_SCREEN = (
    "its screen opens in noVNC (os-getVNCConsole, type novnc) and its serial log is "
    "os-getConsoleOutput"
)
MOVED_BY_CORRAL = (
    "Corral's scheduler places and its balancer moves them; an admin moves one with "
    "POST /api/vms/{id}/migrate/"
)
NOT_TAKEN = {
    "lock": ("lock servers", "who may stop, change or delete one is decided by its grants"),
    "unlock": ("lock servers", "who may stop, change or delete one is decided by its grants"),
    "shelve": ("shelve servers", "stop it (os-stop): it keeps its disk and starts again"),
    "shelveOffload": ("shelve servers", "stop it (os-stop): it keeps its disk and starts again"),
    "unshelve": ("shelve servers", "start a stopped server with os-start"),
    "rescue": ("rescue servers", ONE_SCREEN),
    "unrescue": ("rescue servers", ONE_SCREEN),
    "resize": ("resize servers", "create a server with the other flavor"),
    "confirmResize": ("resize servers", "create a server with the other flavor"),
    "revertResize": ("resize servers", "create a server with the other flavor"),
    "rebuild": ("rebuild servers", "delete it and create another from the image"),
    "createBackup": ("back servers up", "upload an image to Glance (image create)"),
    "migrate": ("migrate servers through Nova's API", MOVED_BY_CORRAL),
    "os-migrateLive": ("migrate servers through Nova's API", MOVED_BY_CORRAL),
    "evacuate": ("evacuate servers through Nova's API", MOVED_BY_CORRAL),
    "changePassword": ("set servers' passwords", "log in with a key pair, or set one in user_data"),
    "addSecurityGroup": ("have security groups", NO_NETWORK_CHANGES),
    "removeSecurityGroup": ("have security groups", NO_NETWORK_CHANGES),
    "addFloatingIp": ("change servers' addresses", NO_NETWORK_CHANGES),
    "removeFloatingIp": ("change servers' addresses", NO_NETWORK_CHANGES),
    "addFixedIp": ("change servers' addresses", NO_NETWORK_CHANGES),
    "removeFixedIp": ("change servers' addresses", NO_NETWORK_CHANGES),
    "injectNetworkInfo": ("change servers' networks", NO_NETWORK_CHANGES),
    "resetNetwork": ("change servers' networks", NO_NETWORK_CHANGES),
    "os-resetState": ("reset servers' states", "a server's state is what its host reports"),
    "forceDelete": ("soft-delete servers", "DELETE /servers/{id} removes a server at once"),
    "restore": ("soft-delete servers", "a deleted server is gone; nothing waits to be restored"),
    "trigger_crash_dump": ("trigger crash dumps", "read its serial log (os-getConsoleOutput)"),
    "os-getSerialConsole": ("open serial consoles through Nova's API", ONE_SCREEN),
    "os-getSPICEConsole": ("open SPICE consoles", ONE_SCREEN),
    "os-getRDPConsole": ("open RDP consoles", ONE_SCREEN),
    "os-getMKSConsole": ("open MKS consoles", ONE_SCREEN),
}


class ServerActionView(ServerViews):
    def post(self, request, server_id: str):
        data = request.data
        if not isinstance(data, dict) or len(data) != 1:
            raise ValidationError({"action": 'The body names one action, e.g. {"os-start": null}.'})
        ((action, argument),) = data.items()
        handler = ACTIONS.get(action)
        if handler is None:
            raise BadRequest(not_taken(action))
        vm, _ = self.vm_or_record(server_id)
        if vm is None:
            raise Conflict(f"Cannot '{action}' instance {server_id} while it is in vm_state error")
        return handler(self, vm, argument)

    def operate(self, vm, kinds: list[str], action: str, rule: str) -> Response:
        services.operate(self.request.user, vm, kinds, action, rule)
        return Response(status=status.HTTP_202_ACCEPTED)

    def start(self, vm, argument):
        return self.operate(vm, [JobKind.START], "start", "servers:start")

    def stop(self, vm, argument):
        return self.operate(vm, [JobKind.POWEROFF], "stop", "servers:stop")

    def pause(self, vm, argument):
        return self.operate(vm, [JobKind.SUSPEND], "pause", "os-pause-server:pause")

    def unpause(self, vm, argument):
        return self.operate(vm, [JobKind.RESUME], "unpause", "os-pause-server:unpause")

    def suspend(self, vm, argument):
        return self.operate(vm, [JobKind.SUSPEND], "suspend", "os-suspend-server:suspend")

    def resume(self, vm, argument):
        return self.operate(vm, [JobKind.RESUME], "resume", "os-suspend-server:resume")

    def reboot(self, vm, argument):
        kind = (argument or {}).get("type") if isinstance(argument, dict) else None
        if kind not in ("SOFT", "HARD"):
            raise ValidationError({"reboot.type": "'SOFT' or 'HARD'."})
        stop = JobKind.SHUTDOWN if kind == "SOFT" else JobKind.POWEROFF
        return self.operate(vm, [stop, JobKind.START], "reboot", "servers:reboot")

    def console_output(self, vm, argument):
        if not holds(self.request.user, OPERATE, vm):
            raise policy_refused("os_compute_api:os-console-output")
        length = (argument or {}).get("length") if isinstance(argument, dict) else None
        if length is not None:
            try:
                length = int(length)
            except (TypeError, ValueError):
                raise ValidationError({"length": f"{length!r} is not a whole number."}) from None
        text = ConsoleLog.objects.filter(vm=vm).values_list("text", flat=True).first() or ""
        if length is not None and length >= 0:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-length:]) if length else ""
        return Response({"output": text})

    def create_image(self, vm, argument):
        """Nova's 202, the new image's URL in ``Location`` (where Nova names it before 2.45,
        the microversions Corral serves); the image is saving until its job has made it."""
        name, metadata = bodies.image_request(argument)
        image = services.image_of_server(self.request.user, vm, name, metadata)
        response = Response(status=status.HTTP_202_ACCEPTED)
        response["Location"] = f"{base_url(self.request)}/image/v2/images/{image.uuid}"
        return response

    def vnc_console(self, vm, argument):
        kind = (argument or {}).get("type") if isinstance(argument, dict) else None
        if kind != "novnc":
            raise ValidationError({"type": "Corral's screens open in noVNC: type 'novnc'."})
        return Response({"console": {"type": "novnc", "url": console_url(self.request, vm)}})


ACTIONS = {
    "os-start": ServerActionView.start,
    "os-stop": ServerActionView.stop,
    "reboot": ServerActionView.reboot,
    "pause": ServerActionView.pause,
    "unpause": ServerActionView.unpause,
    "suspend": ServerActionView.suspend,
    "resume": ServerActionView.resume,
    "os-getConsoleOutput": ServerActionView.console_output,
    "os-getVNCConsole": ServerActionView.vnc_console,
    "createImage": ServerActionView.create_image,
}


def not_taken(action: str) -> str:
    """The 400's message for an action Corral does not take: why, and what instead; Nova's
    own for a name it does not know either."""
    if action not in NOT_TAKEN:
        return f"There is no such action: {action}"
    what, instead = NOT_TAKEN[action]
    return f"Corral does not {what} ('{action}'): {instead}."
