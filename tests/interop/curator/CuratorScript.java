// One scripted run of Curator's recipes (Debian's libcurator-recipes-java) against the server named
// in args[0]: one line per step, for tests/interop/test_curator.py to compare between zkpy and
// Apache ZooKeeper. Nothing that differs by run is printed (session ids, zxids, times).

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.nodes.PersistentNode;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

public class CuratorScript {
    static void say(String step, Object value) {
        System.out.println(step + ": " + value);
    }

    static CuratorFramework client(String hosts) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(hosts, 10000, 10000, new RetryNTimes(3, 100));
        c.start();
        if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("not connected");
        }
        return c;
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework c1 = client(args[0]);
        CuratorFramework c2 = client(args[0]);

        InterProcessMutex m1 = new InterProcessMutex(c1, "/cur/lock");
        InterProcessMutex m2 = new InterProcessMutex(c2, "/cur/lock");
        say("lock by c1", m1.acquire(10, TimeUnit.SECONDS));
        say("lock by c2 while c1 holds it", m2.acquire(300, TimeUnit.MILLISECONDS));
        say("lock re-entered by c1", m1.acquire(10, TimeUnit.SECONDS));
        m1.release();
        m1.release();
        say("lock by c2 once c1 released it", m2.acquire(10, TimeUnit.SECONDS));
        m2.release();

        LeaderLatch l1 = new LeaderLatch(c1, "/cur/leader", "one");
        l1.start();
        say("latch one leads", l1.await(10, TimeUnit.SECONDS));
        LeaderLatch l2 = new LeaderLatch(c2, "/cur/leader", "two");
        l2.start();
        say("latch two leads while one does", l2.await(300, TimeUnit.MILLISECONDS));
        say("participants", l2.getParticipants().size());
        l1.close();
        say("latch two leads once one closed", l2.await(10, TimeUnit.SECONDS));
        l2.close();

        DistributedAtomicLong counter = new DistributedAtomicLong(c1, "/cur/counter", new RetryNTimes(10, 10));
        AtomicValue<Long> v = counter.increment();
        say("increment", v.succeeded() + " " + v.preValue() + "->" + v.postValue());
        v = counter.add(41L);
        say("add 41", v.succeeded() + " " + v.postValue());
        v = counter.compareAndSet(42L, 7L);
        say("compareAndSet 42->7", v.succeeded() + " " + v.postValue());
        v = counter.compareAndSet(42L, 9L);
        say("compareAndSet 42->9", v.succeeded());
        say("get", counter.get().postValue());

        SharedCount shared = new SharedCount(c2, "/cur/shared", 5);
        shared.start();
        say("shared count", shared.getCount());
        say("trySetCount current", shared.trySetCount(shared.getVersionedValue(), 9));
        say("shared count after", shared.getCount());
        shared.close();

        InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(c1, "/cur/sem", 2);
        Lease a = sem.acquire(10, TimeUnit.SECONDS);
        Lease b = sem.acquire(10, TimeUnit.SECONDS);
        say("third lease while two are held", new InterProcessSemaphoreV2(c2, "/cur/sem", 2).acquire(300, TimeUnit.MILLISECONDS));
        sem.returnLease(a);
        sem.returnLease(b);

        DistributedBarrier barrier = new DistributedBarrier(c1, "/cur/barrier");
        barrier.setBarrier();
        say("waitOnBarrier while set", new DistributedBarrier(c2, "/cur/barrier").waitOnBarrier(300, TimeUnit.MILLISECONDS));
        barrier.removeBarrier();
        say("waitOnBarrier once removed", new DistributedBarrier(c2, "/cur/barrier").waitOnBarrier(10, TimeUnit.SECONDS));

        PersistentNode node = new PersistentNode(c2, CreateMode.EPHEMERAL, false, "/cur/eph", "e".getBytes(StandardCharsets.UTF_8));
        node.start();
        say("persistent node created", node.waitForInitialCreate(10, TimeUnit.SECONDS));
        say("ephemeral owner is c2", c1.checkExists().forPath("/cur/eph").getEphemeralOwner()
                == c2.getZookeeperClient().getZooKeeper().getSessionId());
        node.close();

        try {
            c1.transaction().forOperations(
                    c1.transactionOp().create().forPath("/cur/t", "t".getBytes(StandardCharsets.UTF_8)),
                    c1.transactionOp().check().withVersion(5).forPath("/cur"));
            say("transaction with a bad check", "committed");
        } catch (KeeperException e) {
            say("transaction with a bad check", e.code());
        }
        say("/cur/t after it", c1.checkExists().forPath("/cur/t"));

        List<String> children = new ArrayList<>(c1.getChildren().forPath("/cur"));
        Collections.sort(children);
        say("children of /cur", children);
        c1.close();
        c2.close();
    }
}
