from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

# Browsers ask for /favicon.ico where a page names no icon (the admin's, a JSON answer): the
# site's icon, rather than a login redirect or a "Not Found" line in the log.
favicon = login_not_required(
    RedirectView.as_view(url=static("kvadmin/favicon.svg"), permanent=True)
)

urlpatterns = [
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include("kvadmin.api.urls")),
    path("", include("kvadmin.routing.urls")),
    path("", include("kvadmin.weights.urls")),
    path("", include("kvadmin.residency.urls")),
    path("", include("kvadmin.dashboard.urls")),
    path("", include("kvadmin.api.operations_urls")),
    path("", include("kvadmin.search.urls")),
]

handler500 = "kvadmin.errors.server_error"
