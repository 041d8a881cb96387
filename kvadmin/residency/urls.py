from django.urls import path, register_converter
from django.urls.converters import PathConverter

from kvadmin.residency import views


class StoredModelConverter(PathConverter):
    """A served model name as stored in the index: `path`, but any character, so a name
    stored before names were validated (a newline in it) still links instead of breaking
    the page (NoReverseMatch)."""

    regex = r"[\s\S]+"


register_converter(StoredModelConverter, "model")

urlpatterns = [
    path("blocks/", views.blocks, name="blocks"),
    path("blocks/export.csv", views.blocks_csv, name="blocks-csv"),
    path("blocks/<model:model>/<int:std>/", views.block, name="block"),
    path(
        "blocks/<model:model>/<int:std>/engine-hashes/",
        views.block_engine_hashes,
        name="block-engine-hashes",
    ),
    path("pods/", views.pods, name="pods"),
    path("pods/<str:pod>/", views.pod, name="pod"),
    path("pods/<str:pod>/purge/", views.purge, name="pod-purge"),
    path("explain/", views.explain, name="explain"),
]
