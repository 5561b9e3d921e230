"""zkpy: ZooKeeper in Python.

A coordination service that speaks Apache ZooKeeper 3.8's client protocol, so kazoo,
zkCli.sh and the Java client use it unchanged.
"""

__version__ = "0.1.0"
