from django.contrib import admin

from kvadmin.engines.models import Engine


@admin.register(Engine)
class EngineAdmin(admin.ModelAdmin):
    list_display = [
        "pod",
        "model",
        "kind",
        "events_endpoint",
        "serve_address",
        "dp_size",
        "tokenizer",
        "enabled",
    ]
    list_filter = ["kind", "enabled", "model"]
    search_fields = ["pod", "model", "serve_address", "tokenizer"]
