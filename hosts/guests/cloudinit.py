"""cloud-init's NoCloud seed of a VM: an ISO 9660 volume labelled ``cidata`` holding
``meta-data`` (instance-id = the VM's UUID, local-hostname = its name) and ``user-data`` (a
``#cloud-config`` with the SSH keys of the VM's user, and the template's own user-data merged
in). Written with pycdlib, uploaded to the VM's host (``hosts.driver.write_seed``)
before each start and whenever the VM changes hands, so its next boot sees its new user.
"""

from __future__ import annotations

import email
import io
import json
import logging
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

import pycdlib
import yaml
from django.utils import timezone

from hosts import driver
from hosts.models import VirtualMachine
from project.sshkeys import authorized_keys

logger = logging.getLogger(__name__)


def user_data(vm: VirtualMachine) -> str:
    """``#cloud-config``: the template's user-data with the user's SSH keys added to its
    ``ssh_authorized_keys`` (the template's own keys stay). A VM with user-data of its own gets
    a MIME multi-part document: that config, then the VM's parts as cloud-init would type them."""
    config = template_config(vm)
    if not vm.user_data:
        return config
    document = MIMEMultipart()
    document.attach(MIMEText(config, "cloud-config"))
    for part in own_parts(vm.user_data):
        document.attach(part)
    return document.as_string()


# What cloud-init makes of a part by how it starts (cloudinit.handlers' "starts with" table).
PART_TYPES = (
    ("#cloud-config-archive", "cloud-config-archive"),
    ("#cloud-config", "cloud-config"),
    ("#cloud-boothook", "cloud-boothook"),
    ("#include", "x-include-url"),
    ("#part-handler", "part-handler"),
    ("## template: jinja", "jinja2"),
    ("#!", "x-shellscript"),
)


def own_parts(text: str) -> list:
    """A VM's own user-data as MIME parts: a multi-part document's parts as they are, else
    one part typed as cloud-init types it by its first characters (unknown: plain text, which
    cloud-init keeps without running)."""
    if text.lstrip().lower().startswith(("content-type:", "mime-version:")):
        message = email.message_from_string(text)
        if message.is_multipart():
            return [part for part in message.get_payload() if not part.is_multipart()]
    subtype = next((kind for start, kind in PART_TYPES if text.startswith(start)), "plain")
    return [MIMEText(text, subtype)]


def template_config(vm: VirtualMachine) -> str:
    """The ``#cloud-config`` of the template with the user's keys added."""
    document = yaml.safe_load(vm.template.user_data or "") or {}
    if not isinstance(document, dict):  # refused by the template's validation; never trusted
        document = {}
    keys = [key for key in document.get("ssh_authorized_keys") or [] if isinstance(key, str)]
    if vm.owner_id:
        keys += [key for key in authorized_keys(vm.owner) if key not in keys]
    document["ssh_authorized_keys"] = keys
    return "#cloud-config\n" + yaml.safe_dump(document, sort_keys=False, width=100000)


def meta_data(vm: VirtualMachine) -> str:
    return f"instance-id: {vm.uuid}\nlocal-hostname: {json.dumps(vm.name)}\n"


def seed_iso(vm: VirtualMachine) -> bytes:
    """The NoCloud ISO of ``vm`` as bytes."""
    return nocloud_iso(meta_data(vm), user_data(vm))


def nocloud_iso(meta: str, user: str) -> bytes:
    """An ISO 9660 volume labelled ``cidata`` holding ``meta-data`` and ``user-data``."""
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident="cidata")
    for name, text in (("meta-data", meta), ("user-data", user)):
        data = text.encode()
        iso.add_fp(
            io.BytesIO(data),
            len(data),
            "/" + name.replace("-", "").upper() + ".;1",
            rr_name=name,
            joliet_path="/" + name,
        )
    out = io.BytesIO()
    iso.write_fp(out)
    iso.close()
    return out.getvalue()


def read_seed(data: bytes) -> dict[str, str]:
    """The files of a seed ISO by name (what a guest's cloud-init would read)."""
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(data))
    try:
        files = {}
        for name in ("meta-data", "user-data"):
            out = io.BytesIO()
            iso.get_file_from_iso_fp(out, rr_path="/" + name)
            files[name] = out.getvalue().decode()
        return files
    finally:
        iso.close()


def write_seed(vm: VirtualMachine) -> bool:
    """Upload the VM's seed to its host; False when it has no host or the host no pool."""
    if vm.host is None:
        return False
    return write_seed_on(vm.host, vm)


def write_seed_on(host, vm: VirtualMachine) -> bool:
    """Upload the VM's seed to ``host`` (its destination, when it migrates), and note whose
    keys it holds."""
    if not driver.write_seed(host.uri, str(vm.uuid), seed_iso(vm), host.storage_pool):
        return False
    VirtualMachine.objects.filter(pk=vm.pk).update(
        seed_written_at=timezone.now(), seed_keys_of=vm.owner_id
    )
    return True


def seed_is_stale(vm: VirtualMachine) -> bool:
    """The seed on the VM's host holds another user's keys than its owner's (it changed
    hands since): the guest-info loop rewrites it. A seed never written is the start's."""
    return vm.seed_written_at is not None and vm.seed_keys_of != vm.owner_id
