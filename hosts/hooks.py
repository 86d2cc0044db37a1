"""Hook scripts run around VM operations (XAPI's rule for their exit codes).

Executables in ``CORRAL_HOOKS_DIR/<event>/`` run in sorted order with
``--vm-uuid UUID --vm-id ID --reason REASON``. Exit 0 continues; exit 1 is logged in the job's
journal and the job continues; any other exit (or a timeout) fails the job.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from django.conf import settings

HOOK_EVENTS = (
    "vm-pre-start",
    "vm-post-start",
    "vm-pre-migrate",
    "vm-post-migrate",
    "vm-pre-stop",
    "vm-post-stop",
)


class HookFailed(Exception):
    def __init__(self, hook: Path, message: str):
        super().__init__(message)
        self.hook = hook
        self.message = message


def hooks_for(event: str) -> list[Path]:
    folder = Path(settings.CORRAL_HOOKS_DIR) / event
    if not folder.is_dir():
        return []
    return [
        path
        for path in sorted(folder.iterdir())
        if path.is_file() and os.access(path, os.X_OK) and not path.name.startswith(".")
    ]


def run_hooks(event: str, *, vm_uuid: str, vm_id: int, reason: str, log) -> None:
    """Run every hook for ``event``; ``log(message)`` records what each one did."""
    for hook in hooks_for(event):
        command = [str(hook), "--vm-uuid", vm_uuid, "--vm-id", str(vm_id), "--reason", reason]
        try:
            completed = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=settings.CORRAL_HOOK_TIMEOUT,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise HookFailed(hook, f"Hook {event}/{hook.name} did not finish in time.") from exc
        output = (completed.stderr or completed.stdout or "").strip()[-500:]
        if completed.returncode == 0:
            log(f"Hook {event}/{hook.name} ran")
        elif completed.returncode == 1:
            log(f"Hook {event}/{hook.name} exited 1 (continuing): {output}")
        else:
            raise HookFailed(
                hook,
                f"Hook {event}/{hook.name} exited {completed.returncode}: {output or 'no output'}",
            )
