package kafkatest

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
)

// toolMains maps the name of each Kafka CLI tool (its bin/<name>.sh script
// in the Kafka distribution, without .sh) to the main class the script runs
// in Kafka 4.4 (the classes are in kafka-tools and kafka_2.13;
// TestToolMainClasses finds each in the resolved jars).
var toolMains = map[string]string{
	"kafka-acls":                     "org.apache.kafka.tools.AclCommand",
	"kafka-broker-api-versions":      "org.apache.kafka.tools.BrokerApiVersionsCommand",
	"kafka-client-metrics":           "org.apache.kafka.tools.ClientMetricsCommand",
	"kafka-configs":                  "org.apache.kafka.tools.ConfigCommand",
	"kafka-console-consumer":         "org.apache.kafka.tools.consumer.ConsoleConsumer",
	"kafka-console-producer":         "org.apache.kafka.tools.ConsoleProducer",
	"kafka-console-share-consumer":   "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
	"kafka-consumer-groups":          "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
	"kafka-consumer-perf-test":       "org.apache.kafka.tools.ConsumerPerformance",
	"kafka-delegation-tokens":        "org.apache.kafka.tools.DelegationTokenCommand",
	"kafka-delete-records":           "org.apache.kafka.tools.DeleteRecordsCommand",
	"kafka-dump-log":                 "org.apache.kafka.tools.DumpLogSegments",
	"kafka-e2e-latency":              "org.apache.kafka.tools.EndToEndLatency",
	"kafka-features":                 "org.apache.kafka.tools.FeatureCommand",
	"kafka-get-offsets":              "org.apache.kafka.tools.GetOffsetShell",
	"kafka-groups":                   "org.apache.kafka.tools.GroupsCommand",
	"kafka-leader-election":          "org.apache.kafka.tools.LeaderElectionCommand",
	"kafka-log-dirs":                 "org.apache.kafka.tools.LogDirsCommand",
	"kafka-metadata-quorum":          "org.apache.kafka.tools.MetadataQuorumCommand",
	"kafka-producer-perf-test":       "org.apache.kafka.tools.ProducerPerformance",
	"kafka-reassign-partitions":      "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
	"kafka-share-consumer-perf-test": "org.apache.kafka.tools.ShareConsumerPerformance",
	"kafka-share-groups":             "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
	"kafka-storage":                  "kafka.tools.StorageTool",
	"kafka-streams-groups":           "org.apache.kafka.tools.streams.StreamsGroupCommand",
	"kafka-topics":                   "org.apache.kafka.tools.TopicCommand",
	"kafka-transactions":             "org.apache.kafka.tools.TransactionsCommand",
	"kafka-verifiable-consumer":      "org.apache.kafka.tools.VerifiableConsumer",
	"kafka-verifiable-producer":      "org.apache.kafka.tools.VerifiableProducer",
}

// longRunning are the tools that move data for a while: they keep the JIT's
// optimising compiler and get a larger heap. The others are short admin
// commands, which start faster with the client compiler alone.
var longRunning = map[string]bool{
	"kafka-console-consumer":         true,
	"kafka-console-producer":         true,
	"kafka-console-share-consumer":   true,
	"kafka-consumer-perf-test":       true,
	"kafka-e2e-latency":              true,
	"kafka-producer-perf-test":       true,
	"kafka-share-consumer-perf-test": true,
	"kafka-verifiable-consumer":      true,
	"kafka-verifiable-producer":      true,
}

var (
	adminToolFlags = []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData"}
	dataToolFlags  = []string{"-Xmx512m", "-XX:+UseSerialGC", "-XX:-UsePerfData"}
)

// ToolNames returns the names [Tool] accepts, sorted.
func ToolNames() []string {
	names := make([]string, 0, len(toolMains))
	for n := range toolMains {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ToolMainClass returns the main class of the tool name ("kafka-topics"), or
// "" for an unknown name.
func ToolMainClass(name string) string { return toolMains[name] }

// Tool runs the Kafka CLI tool name (as its bin/<name>.sh would, e.g.
// "kafka-topics", "kafka-configs", "kafka-consumer-groups"; see [ToolNames])
// with args, e.g. "--bootstrap-server", addr, "--list", and waits for it.
// stdout and stderr are what it printed (its log4j output, warnings and
// errors only, goes to stderr); err is non-nil when it could not start or
// exited non-zero, and then carries the end of stderr. Stdin is empty: use
// [ToolCommand] to feed it or to run it beside the test.
func Tool(ctx context.Context, name string, args ...string) (stdout, stderr string, err error) {
	cmd, err := ToolCommand(ctx, name, args...)
	if err != nil {
		return "", "", err
	}
	return run(cmd, name)
}

// ToolCommand returns the command that runs the tool name with args, not
// started; ctx kills it.
func ToolCommand(ctx context.Context, name string, args ...string) (*exec.Cmd, error) {
	main := toolMains[name]
	if main == "" {
		return nil, fmt.Errorf("kafkatest: unknown Kafka tool %q (known: %v)", name, ToolNames())
	}
	p, err := tools()
	if err != nil {
		return nil, err
	}
	cp, err := classpath()
	if err != nil {
		return nil, err
	}
	logCfg, err := toolsLogConfig()
	if err != nil {
		return nil, err
	}
	flags := adminToolFlags
	if longRunning[name] {
		flags = dataToolFlags
	}
	jargs := append(append([]string{}, flags...), "-cp", cp, "-Dlog4j2.configurationFile="+logCfg, main)
	return exec.CommandContext(ctx, p.java, append(jargs, args...)...), nil
}

var (
	//go:embed log4j2-tools.properties
	toolsLog4j []byte
	//go:embed log4j2-broker.properties
	brokerLog4j []byte
)

// logConfigs are the log4j2 files written into the cache directory once per
// process.
var logConfigs struct {
	sync.Mutex
	paths map[string]string
}

func toolsLogConfig() (string, error) { return logConfig("log4j2-tools.properties", toolsLog4j) }

// brokerLogConfig returns the nodes' log4j2 file; with requests, the
// request logger is at DEBUG (Options.RequestLog).
func brokerLogConfig(requests bool) (string, error) {
	if requests {
		b := bytes.Replace(brokerLog4j, []byte("logger.request.level = warn"), []byte("logger.request.level = debug"), 1)
		return logConfig("log4j2-broker-requests.properties", b)
	}
	return logConfig("log4j2-broker.properties", brokerLog4j)
}

// logConfig writes content to <pomDir>/<name> (atomically: other processes
// may be reading it) and returns the path.
func logConfig(name string, content []byte) (string, error) {
	logConfigs.Lock()
	defer logConfigs.Unlock()
	if p, ok := logConfigs.paths[name]; ok {
		return p, nil
	}
	dir, err := pomDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	path := filepath.Join(dir, name)
	if b, err := os.ReadFile(path); err != nil || string(b) != string(content) {
		f, err := os.CreateTemp(dir, name+".tmp*")
		if err != nil {
			return "", fmt.Errorf("kafkatest: %w", err)
		}
		_, werr := f.Write(content)
		cerr := f.Close()
		if werr != nil || cerr != nil {
			os.Remove(f.Name())
			return "", fmt.Errorf("kafkatest: writing %s: %v %v", path, werr, cerr)
		}
		if err := os.Rename(f.Name(), path); err != nil {
			return "", fmt.Errorf("kafkatest: %w", err)
		}
	}
	if logConfigs.paths == nil {
		logConfigs.paths = map[string]string{}
	}
	logConfigs.paths[name] = path
	return path, nil
}
