"""Persistence in ZooKeeper 3.8's on-disk formats: txn log, snapshots, recovery (pure; I/O through a Disk)."""
