"""Corral's admin site: Django's, with the operator dashboard on its index page and a
fragment of it that the page polls to stay current."""

from django.contrib import admin
from django.template.response import TemplateResponse
from django.urls import path

from project.lockout import AdminLoginForm


class CorralAdminSite(admin.AdminSite):
    site_header = "Corral administration"
    site_title = "Corral"
    index_title = "Clusters, hosts, VMs and access"
    # Password checks go through the log-in lockout (project/lockout.py).
    login_form = AdminLoginForm

    def get_urls(self):
        fragment = self.admin_view(self.dashboard_view)
        return [path("dashboard/", fragment, name="dashboard"), *super().get_urls()]

    def index(self, request, extra_context=None):
        from project.dashboard import dashboard

        extra_context = {"dashboard": dashboard(request, self), **(extra_context or {})}
        return super().index(request, extra_context)

    def dashboard_view(self, request):
        """The dashboard's figures alone (HTML), for the index page to refresh itself."""
        from project.dashboard import dashboard

        context = {"dashboard": dashboard(request, self)}
        return TemplateResponse(request, "admin/corral/dashboard.html", context)
