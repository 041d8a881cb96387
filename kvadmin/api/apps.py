from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "kvadmin.api"
    verbose_name = "API"
