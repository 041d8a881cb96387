from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "kvadmin.gateway"
    verbose_name = "Gateway endpoint picker"
