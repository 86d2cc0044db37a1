"""Hook scripts run around VM operations (XAPI's rule for their exit codes), and to fence a lost
host (``host-fence``, ``hosts.sync.fencing``).

Executables in ``CORRAL_HOOKS_DIR/<event>/`` run in sorted order, never through a shell, each
within ``CORRAL_HOOK_TIMEOUT``. VM hooks get ``--vm-uuid UUID --vm-id ID --reason REASON``:
exit 0 continues; exit 1 is logged in the job's journal and the job continues; any other exit
(or a timeout) fails the job.
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
    "host-fence",
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


def run_hook(
    event: str, hook: Path, args: list[str], env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run one hook (no shell) within ``CORRAL_HOOK_TIMEOUT``; ``env`` is added to Corral's
    environment. Returns its exit code and the tail of its output (stderr, else stdout);
    raises HookFailed when it does not finish in time."""
    try:
        completed = subprocess.run(
            [str(hook), *args],
            capture_output=True,
            text=True,
            timeout=settings.CORRAL_HOOK_TIMEOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env} if env else None,
        )
    except subprocess.TimeoutExpired as exc:
        raise HookFailed(
            hook,
            f"Hook {event}/{hook.name} did not finish within {settings.CORRAL_HOOK_TIMEOUT:g} s.",
        ) from exc
    return completed.returncode, (completed.stderr or completed.stdout or "").strip()[-500:]


def run_hooks(event: str, *, vm_uuid: str, vm_id: int, reason: str, log) -> None:
    """Run every hook for ``event``; ``log(message)`` records what each one did."""
    for hook in hooks_for(event):
        args = ["--vm-uuid", vm_uuid, "--vm-id", str(vm_id), "--reason", reason]
        returncode, output = run_hook(event, hook, args)
        if returncode == 0:
            log(f"Hook {event}/{hook.name} ran")
        elif returncode == 1:
            log(f"Hook {event}/{hook.name} exited 1 (continuing): {output}")
        else:
            raise HookFailed(
                hook,
                f"Hook {event}/{hook.name} exited {returncode}: {output or 'no output'}",
            )
