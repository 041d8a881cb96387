from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from kvadmin.api.models import ApiToken
from kvadmin.api.scopes import parse_grants


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "hint", "scopes", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["hint", "created_at", "last_used_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tokens are shown once: create them with `manage.py api_token create`

    def save_model(self, request: HttpRequest, obj: ApiToken, form, change: bool) -> None:
        obj.scopes = str(parse_grants(obj.scopes))  # canonical: "events:push=b,a" is "=a,b"
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset.active():
            token.revoke()
        messages.success(request, "Revoked.")
