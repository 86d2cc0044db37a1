"""Corral's admin site: Django's, with the operator dashboard on its index page and a
fragment of it that the page polls to stay current.

It lives beside project/admin/, not in it: Django builds the default site by importing this
class, and importing a module of project/admin/ first runs the package, whose screens would
register on a site that is then thrown away for the one being built."""

from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.template.response import TemplateResponse
from django.urls import path

from project.dashboard import dashboard
from project.lockout.forms import AdminLoginForm
from project.lockout.views import answers_429_when_locked_out


class CorralAdminSite(admin.AdminSite):
    site_header = "Corral administration"
    site_title = "Corral"
    index_title = "Clusters, hosts, VMs and access"
    # Password checks go through the log-in lockout (project/lockout/).
    login_form = AdminLoginForm

    @login_not_required
    def login(self, request, extra_context=None):
        # A log-in refused by the lockout answers 429 with Retry-After, as the API does.
        return answers_429_when_locked_out(super().login)(request, extra_context)

    def get_urls(self):
        fragment = self.admin_view(self.dashboard_view)
        return [path("dashboard/", fragment, name="dashboard"), *super().get_urls()]

    def index(self, request, extra_context=None):
        extra_context = {
            "dashboard": dashboard(request, self),
            "dashboard_still": dashboard(request, self, live=False),
            **(extra_context or {}),
        }
        return super().index(request, extra_context)

    def dashboard_view(self, request):
        """The dashboard's figures alone (HTML), for the index page to refresh itself."""
        context = {"dashboard": dashboard(request, self)}
        return TemplateResponse(request, "admin/corral/dashboard.html", context)
