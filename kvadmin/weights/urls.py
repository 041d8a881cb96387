from django.urls import path

from kvadmin.weights import views

urlpatterns = [
    path("weights/", views.weights, name="weights"),
    path("weights/review/", views.review, name="weights-review"),
    path("weights/save/", views.save, name="weights-save"),
    path(
        "weights/restore/<int:version>/review/",
        views.restore_review,
        name="weights-restore-review",
    ),
    path("weights/restore/<int:version>/", views.restore, name="weights-restore"),
    path("weights/preview/", views.preview, name="weights-preview"),
    path("weights/fit/", views.fit_parameters, name="weights-fit"),
    path("weights/row/", views.new_row, name="weights-row"),
    path("weights/speed-row/", views.new_speed_row, name="weights-speed-row"),
    path("weights/export/kthena.yaml", views.export_yaml, name="weights-export-yaml"),
    path("weights/export/weights.json", views.export_json, name="weights-export-json"),
]
