"""Drives Corral through blazarclient's Python API with a keystoneauth session, as a script
would; run by the OpenStack clients' own Python (var/openstack-venv), not by the test suite.

Usage: python blazarclient_session.py AUTH_URL USERNAME PASSWORD START END
Prints one JSON object: what each call returned (or the error it raised).
"""

import json
import sys

from blazarclient import client, exception
from keystoneauth1 import session
from keystoneauth1.identity import v3


def main() -> None:
    auth_url, username, password, start, end = sys.argv[1:6]
    auth = v3.Password(
        auth_url=auth_url,
        username=username,
        password=password,
        project_name=username,
        user_domain_name="Default",
        project_domain_name="Default",
    )
    blazar = client.Client(
        1,
        session=session.Session(auth=auth),
        service_type="reservation",
        interface="public",
        region_name="RegionOne",
    )
    seen = {}
    lease = blazar.lease.create(
        name="api-lease",
        start=start,
        end=end,
        reservations=[
            {
                "resource_type": "virtual:instance",
                "vcpus": 1,
                "memory_mb": 1024,
                "disk_gb": 0,
                "amount": 1,
                "affinity": "False",
                "resource_properties": "",
            }
        ],
        events=[],
    )
    seen["created"] = lease
    reservation = lease["reservations"][0]["id"]
    seen["prolonged"] = blazar.lease.update(lease["id"], prolong_for="2h")
    seen["deferred"] = blazar.lease.update(lease["id"], defer_by="30m")
    seen["grown"] = blazar.lease.update(
        lease["id"], reservations=[{"id": reservation, "amount": 2}]
    )
    seen["listed"] = [item["id"] for item in blazar.lease.list()]
    seen["shown"] = blazar.lease.get(lease["id"])
    try:
        seen["allocations"] = blazar.allocation.list("os-hosts")
    except exception.BlazarClientException as exc:  # an admin's call: Blazar's policy refusal
        seen["allocations"] = {"code": exc.kwargs.get("code"), "message": str(exc)}
    try:
        blazar.lease.get("00000000-0000-0000-0000-000000000000")
    except exception.BlazarClientException as exc:
        seen["missing"] = {"code": exc.kwargs.get("code"), "message": str(exc)}
    blazar.lease.delete(lease["id"])
    seen["after_delete"] = [item["id"] for item in blazar.lease.list()]
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
