"""Routing: scoring requests (`service.score`), the decision log and the live feed."""
