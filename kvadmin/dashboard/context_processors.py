from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

# (label, url name): pages appear in the navigation once their app routes them.
NAVIGATION = [
    ("Dashboard", "home"),
    ("Live feed", "feed"),
    ("Blocks", "blocks"),
    ("Pods", "pods"),
    ("Weights", "weights"),
    ("Explain", "explain"),
    ("API", "api-docs"),
]


def _routed() -> list[tuple[str, str]]:
    links = []
    for label, name in NAVIGATION:
        try:
            links.append((label, reverse(name)))
        except NoReverseMatch:
            continue
    return links


def navigation(request: HttpRequest) -> dict:
    return {"navigation": _routed()}
