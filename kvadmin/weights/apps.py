from django.apps import AppConfig


class WeightsConfig(AppConfig):
    name = "kvadmin.weights"
