from django.urls import path

from kvadmin.residency import views

urlpatterns = [
    path("blocks/", views.blocks, name="blocks"),
    path("blocks/<path:model>/<int:std>/", views.block, name="block"),
    path(
        "blocks/<path:model>/<int:std>/engine-hashes/",
        views.block_engine_hashes,
        name="block-engine-hashes",
    ),
    path("pods/", views.pods, name="pods"),
    path("pods/<str:pod>/", views.pod, name="pod"),
    path("pods/<str:pod>/purge/", views.purge, name="pod-purge"),
    path("explain/", views.explain, name="explain"),
]
