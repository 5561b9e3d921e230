"""Helpers for tests: real zkpy and Apache ZooKeeper servers in subprocesses on loopback."""
