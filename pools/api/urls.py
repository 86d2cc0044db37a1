from rest_framework.routers import SimpleRouter

from pools.api import views

router = SimpleRouter()
router.register("vmpools", views.VmPoolViewSet)
urlpatterns = router.urls
