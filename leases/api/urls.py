from rest_framework.routers import SimpleRouter

from leases.api import views

router = SimpleRouter()
router.register("leases", views.LeaseViewSet)
urlpatterns = router.urls
