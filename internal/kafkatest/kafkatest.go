// Package kafkatest runs a real Apache Kafka 4.x for tests: a KRaft cluster
// of one or more brokers on 127.0.0.1, Kafka's command-line tools, and small
// Java client programs, all as `java` processes on the classpath that Maven
// resolves from this package's pom.xml (org.apache.kafka:kafka_2.13 and
// kafka-tools, version [Version]).
//
// # Requirements and skipping
//
// The harness needs `java`, `javac` (a JDK, 17 or later: Kafka 4's broker
// requires Java 17) and `mvn` on PATH ($JAVA_HOME/bin is tried first for the
// JDK). [Require] skips the test when one is missing, or when the tests run
// with -short; with SIDECAR_REQUIRE_INTEGRATION=1 (set by .ci/run) a missing
// tool fails the test instead. [Start] calls Require.
//
// # The classpath, resolved once
//
// Maven takes seconds even when every jar is in the local repository
// (~/.m2), so the classpath is resolved once and cached: the embedded
// pom.xml is written to <cache>/<hash of pom.xml>/pom.xml, `mvn
// dependency:build-classpath` writes classpath.txt beside it, and later test
// processes read that file (re-resolving only when a jar it names is gone).
// <cache> is $KAFKATEST_CACHE_DIR, else os.UserCacheDir()/diskless-sidecar/
// kafkatest ($XDG_CACHE_HOME or ~/.cache). A file lock there serialises
// resolution between test binaries that `go test ./...` runs in parallel.
// Changing pom.xml changes the hash, so a new Kafka version resolves on the
// next run. .ci/run pre-fetches the jars into ~/.m2 with one mvn command.
//
// # Clusters
//
// [Start] formats and starts a cluster (combined broker+controller nodes, or
// brokers and separate controllers; see [Options]) with a static controller
// quorum, on free ports of 127.0.0.1 (or [Options.Host]), in a temporary
// directory, and returns when every broker is listed in a Metadata answer.
// [Cluster.Kill] sends SIGKILL to a node and [Cluster.Restart] starts it
// again on its ports and data. Each node's output (log4j2, INFO) goes to
// kafka.log in its directory. When the test fails, the cleanup prints the
// end of every node's log and keeps the directory (its path is printed);
// otherwise it kills the nodes and removes the directory. A node dies with
// the test binary (PR_SET_PDEATHSIG), so a test that times out leaves no
// broker running.
//
// # Tools and Java programs
//
// [Tool] runs a Kafka CLI tool (kafka-topics, kafka-configs,
// kafka-consumer-groups, kafka-producer-perf-test, …) by its main class
// against any bootstrap address, a sidecar's included. [Java] runs one of the
// programs in the java/ directory of this package (compiled once with javac
// against the kafka-clients classpath and cached like the classpath);
// [ParseRecords] reads the JSON lines the Consume program prints.
package kafkatest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Version is the Apache Kafka version that pom.xml pins (kafka.version);
// TestPomVersion keeps the two equal.
const Version = "4.4.0"

// requireEnv is the variable that turns a missing tool into a failure.
const requireEnv = "SIDECAR_REQUIRE_INTEGRATION"

// Require skips t with -short, or when java, javac or mvn is missing (unless
// SIDECAR_REQUIRE_INTEGRATION=1, which fails it); then it resolves the
// classpath (cached across processes), failing t when Maven cannot. Call it
// before [Tool] or [Java] in a test that does not call [Start].
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs Apache Kafka (java); skipped with -short")
	}
	if _, err := tools(); err != nil {
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("Apache Kafka tests need a JDK and Maven (%s=1): %v", requireEnv, err)
		}
		t.Skipf("%v; set %s=1 to make this a failure", err, requireEnv)
	}
	if _, err := classpath(); err != nil {
		t.Fatalf("resolving Apache Kafka %s with Maven: %v", Version, err)
	}
}

// toolPaths are the executables the harness runs.
type toolPaths struct {
	java, javac, mvn string
}

// tools finds java and javac ($JAVA_HOME/bin first, then PATH) and mvn
// (PATH), or says which are missing.
func tools() (toolPaths, error) {
	var p toolPaths
	var missing []string
	find := func(name string, jdk bool) string {
		if home := os.Getenv("JAVA_HOME"); jdk && home != "" {
			c := filepath.Join(home, "bin", name)
			if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
				return c
			}
		}
		path, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
		}
		return path
	}
	p.java = find("java", true)
	p.javac = find("javac", true)
	p.mvn = find("mvn", false)
	if len(missing) > 0 {
		return p, fmt.Errorf("kafkatest: %s not found in $JAVA_HOME/bin or PATH (install a JDK 17+ and Maven: apt-get install openjdk-17-jdk-headless maven)",
			strings.Join(missing, ", "))
	}
	return p, nil
}

// Classpath returns the classpath of Apache Kafka's broker, tools and
// client (jars joined with ':'), after [Require]: for a test that runs a
// Java class of its own.
func Classpath(t testing.TB) string {
	t.Helper()
	Require(t)
	cp, _ := classpath()
	return cp
}
