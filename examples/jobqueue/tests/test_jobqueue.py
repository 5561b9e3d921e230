"""The queue's behaviour, with kazoo and with zkpy's client (the ``client`` fixture)."""

import asyncio
from typing import Any

from jobqueue import JobQueue
from kazoo.client import KazooClient

from zkpy import Client


def test_jobs_are_claimed_in_order_and_completed_once(client: Any) -> None:
    queue = JobQueue(client)
    first, second = queue.submit(b"resize a.png"), queue.submit(b"resize b.png")
    job = queue.claim("worker-1")
    assert job is not None and (job.name, job.payload) == (first, b"resize a.png")
    assert queue.claim("worker-2").name == second  # the first is held
    assert queue.claim("worker-3") is None
    queue.complete(job, b"ok")
    assert queue.result(first) == b"ok"
    assert queue.pending() == [second]


def test_a_dead_workers_job_becomes_claimable_again(zk_hosts: str, client: Any) -> None:
    queue = JobQueue(client)
    name = queue.submit(b"payload")
    worker = KazooClient(zk_hosts)  # a worker process of its own
    worker.start()
    assert JobQueue(worker).claim("doomed").name == name
    assert queue.claim("other") is None
    worker.stop()  # its session ends: the ephemeral claim goes
    worker.close()
    assert queue.claim("other").name == name


def test_a_kazoo_producer_and_a_zkpy_worker_share_the_queue(zk_hosts: str, zk_client: Client) -> None:
    producer = KazooClient(zk_hosts)
    producer.start()
    try:
        name = JobQueue(producer).submit(b"from kazoo")
        queue = JobQueue(zk_client)  # zk_client: the plugin's zkpy Client on the same chroot
        job = queue.claim("zkpy-worker")
        assert job is not None and job.payload == b"from kazoo"
        queue.complete(job, b"done by zkpy")
        assert producer.get(f"/jobs/done/{name}")[0] == b"done by zkpy"
    finally:
        producer.stop()
        producer.close()


def test_the_async_client_sees_the_queue(zk_async_client: Any, zk_client: Client) -> None:
    JobQueue(zk_client).submit(b"x")

    async def pending() -> list[str]:
        async with zk_async_client() as zk:
            return sorted(await zk.get_children("/jobs/queue"))

    assert asyncio.run(pending()) == ["job-0000000000"]
