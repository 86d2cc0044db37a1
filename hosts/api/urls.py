from django.urls import path
from rest_framework.routers import SimpleRouter

from hosts.api import images, quotas, views

router = SimpleRouter()
router.register("clusters", views.ClusterViewSet)
router.register("hosts", views.HostViewSet)
router.register("templates", views.TemplateViewSet)
router.register("images", images.ImageViewSet)
router.register("vms", views.VirtualMachineViewSet)
router.register("jobs", views.JobViewSet)
router.register("externaldomains", views.ExternalDomainViewSet)
urlpatterns = [
    *router.urls,
    path("me/quota/", quotas.MyQuotaView.as_view(), name="me-quota"),
]
