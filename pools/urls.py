"""Portal pages of the pools: Take a VM, and giving a VM back."""

from django.urls import path

from pools import views

urlpatterns = [
    path("", views.take_page, name="home"),
    path("pools/cards/", views.pool_cards, name="pool-cards"),
    path("pools/<int:pool_id>/take/", views.take_vm, name="take"),
    path("vms/<int:vm_id>/return/", views.vm_return, name="vm-return"),
]
