"""The queue keeps working through the leader's crash, a network partition and a frozen member:
the plugin's ``zk_ensemble`` (three zkpy members of this test's own, whose links it can cut).
One ensemble for the whole story: starting one costs a second or more."""

from jobqueue import JobQueue
from kazoo.client import KazooClient

from zkpy import Client


def test_the_queue_survives_a_crash_a_partition_and_a_frozen_member(zk_ensemble) -> None:
    # the leader crashes: the two others elect a new one, the client moves to a live member
    with Client(zk_ensemble.hosts) as zk:
        queue = JobQueue(zk)
        first = queue.submit(b"before the crash")
        leader = zk_ensemble.leader()
        leader.kill()
        rest = [m for m in zk_ensemble.members if m is not leader]
        new_leader = zk_ensemble.leader(among=rest)
        job = queue.claim("w")
        assert job is not None and job.name == first
        queue.complete(job, b"after the crash")
    leader.restart()  # rejoins as a follower and catches up
    kz = KazooClient(leader.hosts)
    kz.start()
    try:
        kz.sync("/")
        assert kz.get(f"/jobs/done/{first}")[0] == b"after the crash"
    finally:
        kz.stop()
        kz.close()

    # a follower is cut off: the other two are a majority and go on; once healed it catches up
    cut = next(m for m in zk_ensemble.members if m is not new_leader and m is not leader)
    zk_ensemble.isolate(cut)
    with Client(new_leader.hosts) as zk:
        second = JobQueue(zk).submit(b"while cut off")
    zk_ensemble.heal()

    # the restarted old leader freezes (SIGSTOP): the new leader and the healed member carry on
    leader.pause()
    try:
        with Client(cut.hosts, session_timeout=6.0) as zk:
            zk.sync("/")
            queue = JobQueue(zk)
            assert queue.pending() == [second]
            assert queue.claim("w").name == second
    finally:
        leader.resume()
