from rest_framework.routers import SimpleRouter

from pools.api import views

router = SimpleRouter()
router.register("vmpools", views.VmPoolViewSet)
router.register("vms", views.VmReturnViewSet, basename="vm-pool")
urlpatterns = router.urls
