from django.urls import path

from kvadmin.weights import views

urlpatterns = [
    path("weights/", views.weights, name="weights"),
    path("weights/save/", views.save, name="weights-save"),
    path("weights/restore/<int:version>/", views.restore, name="weights-restore"),
    path("weights/preview/", views.preview, name="weights-preview"),
    path("weights/row/", views.new_row, name="weights-row"),
    path("weights/export/kthena.yaml", views.export_yaml, name="weights-export-yaml"),
    path("weights/export/weights.json", views.export_json, name="weights-export-json"),
]
