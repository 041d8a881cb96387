"""Processes the benchmarks start (a tree's scoring service, a do-nothing picker): not
benchmarks themselves, so `make bench`, which runs every script in bench/, leaves them out."""
