// Prints the entries java.util.Properties.load reads from a file, each key and value trimmed as
// ZooKeeper 3.8's QuorumPeerConfig trims them, sorted by key, one "key<TAB>value" line each, with
// backslash, tab, newline and carriage return written as \\, \t, \n, \r; a load that fails prints
// "error" and the exception's class. For tests/interop/test_zoocfg_properties.py.
// Run with Java's single-file launcher: java PropertiesDump.java FILE
import java.io.FileInputStream;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

public class PropertiesDump {
    static String escape(String s) {
        return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r");
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        } catch (IllegalArgumentException e) {
            System.out.println("error " + e.getClass().getSimpleName());
            return;
        }
        Map<String, String> sorted = new TreeMap<>();
        for (Map.Entry<Object, Object> e : props.entrySet()) {
            sorted.put(e.getKey().toString().trim(), e.getValue().toString().trim());
        }
        for (Map.Entry<String, String> e : sorted.entrySet()) {
            System.out.println(escape(e.getKey()) + "\t" + escape(e.getValue()));
        }
    }
}
