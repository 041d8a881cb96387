from django.apps import AppConfig


class FleetConfig(AppConfig):
    name = "kvadmin.fleet"
    verbose_name = "simulated fleet"
