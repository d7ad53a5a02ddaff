import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * Args is the command line shared by the programs of this directory:
 * "--name value" pairs, each name one the program declares, and
 * --property key=value (repeatable) gathered into props, the client's
 * configs. It throws IllegalArgumentException naming the argument for an
 * undeclared name, a name without a value, a --property without '=', and a
 * required name missing.
 */
final class Args {
    /** props holds the --property pairs. */
    final Properties props = new Properties();
    private final Map<String, String> values = new HashMap<>();

    /**
     * Args parses args; required names must be given, optional ones may
     * be.
     */
    Args(String[] args, List<String> required, List<String> optional) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) throw new IllegalArgumentException("missing value for " + a);
            String v = args[++i];
            if (a.equals("--property")) {
                int eq = v.indexOf('=');
                if (eq < 0) throw new IllegalArgumentException("--property wants key=value: " + v);
                props.setProperty(v.substring(0, eq), v.substring(eq + 1));
            } else if (required.contains(a) || optional.contains(a)) {
                values.put(a, v);
            } else {
                throw new IllegalArgumentException("unknown argument " + a);
            }
        }
        for (String r : required) {
            if (!values.containsKey(r)) throw new IllegalArgumentException(String.join(", ", required) + " are required");
        }
    }

    /** get is name's value, or null when it was not given. */
    String get(String name) {
        return values.get(name);
    }

    /** getLong is name's value as a long, or def when it was not given. */
    long getLong(String name, long def) {
        String v = values.get(name);
        return v == null ? def : Long.parseLong(v);
    }
}
