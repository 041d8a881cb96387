from django.urls import path

from kvadmin.search import views

urlpatterns = [path("search/", views.search, name="search")]
