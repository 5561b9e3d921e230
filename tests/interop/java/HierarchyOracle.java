// Prints what ZooKeeper 3.8's QuorumHierarchical says of a group/weight configuration, for
// tests/interop/test_hierarchy_oracle.py: its toString, then one line per subset of the voters
// ("quorum 1,3,5 true"), then the weight of each voter ("weight 3 2").
// Run with Java's single-file launcher: java -cp zookeeper.jar HierarchyOracle.java FILE
import java.io.FileInputStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import org.apache.zookeeper.server.quorum.flexible.QuorumHierarchical;

public class HierarchyOracle {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        QuorumHierarchical qv = new QuorumHierarchical(props);
        System.out.println(qv.toString());
        System.out.println("--");
        List<Long> voters = new ArrayList<>(qv.getVotingMembers().keySet());
        Collections.sort(voters);
        for (int mask = 0; mask < (1 << voters.size()); mask++) {
            Set<Long> acks = new HashSet<>();
            List<String> names = new ArrayList<>();
            for (int i = 0; i < voters.size(); i++) {
                if ((mask & (1 << i)) != 0) {
                    acks.add(voters.get(i));
                    names.add(voters.get(i).toString());
                }
            }
            System.out.println("quorum " + String.join(",", names) + " " + qv.containsQuorum(acks));
        }
        for (Long sid : voters) {
            System.out.println("weight " + sid + " " + qv.getWeight(sid));
        }
    }
}
