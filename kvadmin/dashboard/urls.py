from django.urls import path

from kvadmin.dashboard import views

urlpatterns = [
    path("", views.home, name="home"),
]
