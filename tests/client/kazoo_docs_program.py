"""A kazoo program made of the API calls in kazoo's own documentation (basic_usage.rst,
async_usage.rst and the recipe docstrings), written with kazoo's names.

tests/client/test_kazoo_program.py runs it twice against one zkpy server: as it is, with kazoo's
KazooClient, and with zkpy's Client after the renames docs/client.md's migration table lists
(applied to this file's text), and compares the two results. ``main`` returns what the program
observed, as plain values (strings, numbers, bytes, booleans), so the two runs compare with ==.
"""

import logging
import threading

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLossException, NoAuthException, NoNodeError
from kazoo.protocol.states import EventType
from kazoo.retry import KazooRetry

logging.basicConfig()

WAIT_S = 10.0


def main(hosts, root):
    out = []
    # --- connection handling
    zk = KazooClient(hosts=hosts, timeout=10.0)
    states = []
    changed = threading.Condition()

    def my_listener(state):
        with changed:
            if state == KazooState.LOST:
                states.append("lost")
            elif state == KazooState.SUSPENDED:
                states.append("suspended")
            else:
                states.append("connected")
            changed.notify_all()

    zk.add_listener(my_listener)
    event = zk.start_async()
    event.wait(timeout=30)
    if not zk.connected:
        zk.stop()
        raise Exception("Unable to connect.")
    out.append(("connected", zk.connected))

    # --- creating nodes
    zk.ensure_path(root + "/my/favorite")
    zk.create(root + "/my/favorite/node", b"a value")
    path, stat = zk.create(root + "/made/by/makepath", b"deep", makepath=True, include_data=True)
    out.append(("makepath", path, stat.dataLength))

    # --- reading data
    if zk.exists(root + "/my/favorite"):
        out.append("exists")
    out.append(("missing", zk.exists(root + "/no/such/node")))
    data, stat = zk.get(root + "/my/favorite")
    out.append(f"Version: {stat.version}, data: {data.decode('utf-8')}")
    children = zk.get_children(root + "/my/favorite")
    out.append(f"There are {len(children)} children with names {children}")
    children, stat = zk.get_children(root + "/my/favorite", include_data=True)
    out.append(("children with stat", children, stat.numChildren))

    # --- updating data
    stat = zk.set(root + "/my/favorite", b"some data")
    out.append(("set", stat.version))
    acls, stat = zk.get_acls(root + "/my/favorite")
    out.append(("acls", [(a.perms, a.id.scheme, a.id.id) for a in acls]))
    zk.set_acls(root + "/my/favorite", acls)

    # --- retrying
    result = zk.retry(zk.get, root + "/my/favorite")
    out.append(("retry", result[0]))
    kr = KazooRetry(max_tries=3, ignore_expire=False)
    result = kr(zk.get, root + "/my/favorite")
    out.append(("KazooRetry", result[0]))
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionLossException()
        return "done"

    out.append(("flaky", KazooRetry(max_tries=5, delay=0.01)(flaky), len(calls)))

    # --- watchers
    fired = threading.Event()
    seen = []

    def my_func(event):
        seen.append((event.type == EventType.CHILD, event.path))
        fired.set()

    children = zk.get_children(root + "/my/favorite/node", watch=my_func)
    zk.create(root + "/my/favorite/node/child")
    out.append(("child watch fired", fired.wait(WAIT_S), seen))

    watched = []
    both = threading.Event()

    @zk.ChildrenWatch(root + "/my/favorite/node")
    def watch_children(children):
        watched.append(("children", sorted(children)))
        if len(watched) >= 3:
            both.set()

    @zk.DataWatch(root + "/my/favorite")
    def watch_node(data, stat):
        if stat is None:  # the node was deleted (at the end)
            return False
        watched.append(("data", stat.version, data))
        if len(watched) >= 3:
            both.set()

    zk.create(root + "/my/favorite/node/second")
    out.append(("data and children watches", both.wait(WAIT_S), sorted(watched[:3])))

    # --- transactions
    zk.create(root + "/node")
    zk.create(root + "/node/a")
    transaction = zk.transaction()
    transaction.check(root + "/node/a", version=0)
    transaction.create(root + "/node/b", b"a value")
    results = transaction.commit()
    out.append(("transaction", results))
    transaction = zk.transaction()
    transaction.create(root + "/node/c", b"never")
    transaction.check(root + "/node/a", version=3)
    results = transaction.commit()
    out.append(("failed transaction", [type(r).__name__ for r in results]))

    # --- asynchronous calls
    done = threading.Event()
    got = []

    def my_callback(async_obj):
        try:
            got.append(sorted(async_obj.get()))
        except (ConnectionLossException, NoAuthException):
            got.append("error")
        done.set()

    async_obj = zk.get_children_async(root + "/node")
    async_obj.rawlink(my_callback)
    out.append(("rawlink", done.wait(WAIT_S), got))
    out.append(("create_async", zk.create_async(root + "/node/d", b"x").get(timeout=WAIT_S)))
    try:
        zk.get_async(root + "/node/zzz").get(timeout=WAIT_S)
    except NoNodeError:
        out.append("async NoNodeError")

    # --- recipes
    lock = zk.Lock(root + "/lockpath", "my-identifier")
    with lock:
        out.append(("lock contenders", lock.contenders()))
    counter = zk.Counter(root + "/int")
    counter += 2
    counter -= 1
    out.append(("counter", counter.value, counter.pre_value, counter.post_value))
    election = zk.Election(root + "/electionpath", "my-identifier")
    led = []
    election.run(led.append, "led")
    out.append(("election", led, election.contenders()))
    party = zk.Party(root + "/party", "member-1")
    party.join()
    out.append(("party", len(party), list(party)))
    party.leave()
    queue = zk.Queue(root + "/queue")
    queue.put(b"one")
    queue.put(b"two", priority=1)
    out.append(("queue", len(queue), queue.get(), queue.get()))

    # --- the session and the server
    out.append(("ruok", zk.command(b"ruok")))
    version = zk.server_version()
    out.append(("server version", len(version) >= 2, version[0]))
    zk.sync(root)
    zk.set_hosts(hosts)
    out.append(("client id", zk.client_id is not None and zk.client_id[0] != 0, len(zk.client_id[1])))

    # --- cleaning up
    zk.delete(root + "/my/favorite/node", recursive=True)
    out.append(("deleted", zk.exists(root + "/my/favorite/node")))
    zk.delete(root, recursive=True)
    zk.restart()
    out.append(("restarted", zk.connected, zk.exists("/") is not None))
    zk.stop()
    with changed:
        out.append(("stopped, the listener saw LOST twice",
                    changed.wait_for(lambda: states.count("lost") >= 2, WAIT_S)))
    zk.close()
    out.append(("states", [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s]))
    return out
