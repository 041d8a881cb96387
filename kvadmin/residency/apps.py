from django.apps import AppConfig


class ResidencyConfig(AppConfig):
    name = "kvadmin.residency"
