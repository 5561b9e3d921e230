"""The queue keeps working through a member's crash, a network partition and a frozen member: the
plugin's ``zk_ensemble`` (three zkpy members of this test's own, whose links it can cut)."""

from jobqueue import JobQueue
from kazoo.client import KazooClient

from zkpy import Client


def test_the_queue_survives_the_leaders_crash(zk_ensemble) -> None:
    with Client(zk_ensemble.hosts) as zk:
        queue = JobQueue(zk)
        name = queue.submit(b"before")
        leader = zk_ensemble.leader()
        leader.kill()
        rest = [m for m in zk_ensemble.members if m is not leader]
        zk_ensemble.leader(among=rest)  # a new leader is elected by the two left
        job = queue.claim("w")  # the client reconnects to a live member
        assert job is not None and job.name == name
        queue.complete(job, b"after")
        leader.restart()  # rejoins as a follower and catches up
    kz = KazooClient(leader.hosts)
    kz.start()
    try:
        kz.sync("/")
        assert kz.get(f"/jobs/done/{name}")[0] == b"after"
    finally:
        kz.stop()
        kz.close()


def test_a_cut_off_member_catches_up_and_a_frozen_one_holds_nothing_up(zk_ensemble) -> None:
    leader = zk_ensemble.leader()
    cut, frozen = [m for m in zk_ensemble.members if m is not leader]
    zk_ensemble.isolate(cut)  # its peer links blackholed: a partition
    with Client(leader.hosts) as zk:
        name = JobQueue(zk).submit(b"while cut off")  # leader and frozen-to-be are a majority
    zk_ensemble.heal()
    frozen.pause()  # SIGSTOP: the leader and the healed member must carry on alone
    try:
        with Client(cut.hosts, session_timeout=6.0) as zk:
            zk.sync("/")
            queue = JobQueue(zk)
            assert queue.pending() == [name]
            assert queue.claim("w").name == name
    finally:
        frozen.resume()
