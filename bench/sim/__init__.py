"""The routing simulation behind `bench/routing_quality.py`: traces (`workloads`), a pod's tiered
prefix cache (`cache`), the timed fleet and the routers' delayed view of it (`fleet`), and the
routers compared (`routers`)."""
