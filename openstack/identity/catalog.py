"""The service catalog that identity tokens carry: apps register the OpenStack services they
serve (in their AppConfig.ready()), so this layer never imports them."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class Service:
    """An OpenStack service Corral serves: its catalog type and name, and its URL path."""

    type: str
    name: str
    path: str


_services: dict[str, Service] = {}


def register(service_type: str, name: str, path: str) -> None:
    """Offer ``path`` (e.g. "/reservation/v1") as the public endpoint of ``service_type``."""
    _services[service_type] = Service(service_type, name, "/" + path.strip("/"))


def services() -> list[Service]:
    return sorted(_services.values(), key=lambda service: service.type)


def base_url(request) -> str:
    """Where clients reach Corral: CORRAL_PUBLIC_URL, else the URL this request came to."""
    if settings.CORRAL_PUBLIC_URL:
        return settings.CORRAL_PUBLIC_URL.rstrip("/")
    return request.build_absolute_uri("/").rstrip("/")


def catalog(request) -> list[dict]:
    """Keystone's catalog: one public endpoint per service, in Corral's region."""
    base, region = base_url(request), settings.CORRAL_REGION
    entries = [Service("identity", "keystone", "/identity/v3"), *services()]
    return [
        {
            "id": service.type,
            "type": service.type,
            "name": service.name,
            "endpoints": [
                {
                    "id": f"{service.type}-public",
                    "interface": "public",
                    "region": region,
                    "region_id": region,
                    "url": base + service.path,
                }
            ],
        }
        for service in entries
    ]
