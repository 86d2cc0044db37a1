from django.urls import path
from rest_framework.routers import SimpleRouter

from scheduling.api import views

router = SimpleRouter()
router.register("schedulingpolicies", views.PolicyViewSet)
router.register("schedulingpolicyunits", views.PolicyUnitViewSet)
router.register("affinitygroups", views.AffinityGroupViewSet)
router.register("clusters", views.ClusterBalanceViewSet, basename="cluster")


def parts(prefix: str, viewset, name: str):
    collection = viewset.as_view({"get": "list", "post": "create"})
    member = viewset.as_view({"get": "retrieve", "delete": "destroy"})
    return [
        path(
            f"schedulingpolicies/<int:policy_pk>/{prefix}/", collection, name=f"policy-{name}-list"
        ),
        path(
            f"schedulingpolicies/<int:policy_pk>/{prefix}/<int:pk>/",
            member,
            name=f"policy-{name}-detail",
        ),
    ]


urlpatterns = [
    *router.urls,
    *parts("filters", views.PolicyFilterViewSet, "filter"),
    *parts("weights", views.PolicyWeightViewSet, "weight"),
    *parts("balances", views.PolicyBalanceViewSet, "balance"),
]
