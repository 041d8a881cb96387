from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "kvadmin.metrics"
