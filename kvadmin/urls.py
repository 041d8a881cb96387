from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
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
