package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// kafkaOptions are the flags of the Apache Kafka reference: -kafka starts
// one from internal/kafkatest (the Apache Kafka 4.4 the tests use, resolved
// with Maven), -kafka-brokers names a running one.
type kafkaOptions struct {
	start bool   // -kafka
	nodes int    // -kafka-nodes: brokers of the started cluster
	heap  string // -kafka-heap: each broker's JVM heap
	// rf is the replication factor of the load's topic on Kafka
	// (-kafka-rf); 0: the started cluster's broker count (up to 3), or 1
	// on a running one.
	rf int
	// metadata: the started sidecars (-sidecar-bin) keep their metadata
	// log on the started cluster (-sidecar-metadata-kafka).
	metadata bool
}

// addKafkaFlags registers the Kafka reference's flags on fs.
func addKafkaFlags(fs *flag.FlagSet, o *kafkaOptions) {
	fs.BoolVar(&o.start, "kafka", false, "also run the identical load against Apache Kafka started by the tool (internal/kafkatest: the pinned Kafka 4.4 from Maven, KRaft, on free ports of 127.0.0.1, in a temporary directory; needs java and mvn), after the sidecar, and print both side by side with ratios; the brokers' CPU is measured")
	fs.IntVar(&o.nodes, "kafka-nodes", 1, "with -kafka, the brokers (combined broker and controller nodes) of the started cluster: 1 or 3")
	fs.StringVar(&o.heap, "kafka-heap", "1g", "with -kafka, each broker's JVM heap (-Xms and -Xmx), with the G1 settings of Kafka's kafka-server-start.sh")
	fs.IntVar(&o.rf, "kafka-rf", 0, "replication factor of the load's topic on Kafka (min.insync.replicas one less, at least 1); 0: the started cluster's broker count up to 3 with -kafka, 1 with -kafka-brokers")
	fs.BoolVar(&o.metadata, "sidecar-metadata-kafka", false, "with -kafka and -sidecar-bin, the started sidecars keep their coordinator metadata log on the started Kafka cluster (diskless.metadata.log=kafka, its topic replicated min(3, -kafka-nodes) times), and the brokers' CPU during the sidecar's window is reported beside the sidecar's own")
}

// check validates the Kafka flags against the others.
func (o kafkaOptions) check(kafkaBrokers, sidecarBin string, kfake bool) error {
	switch {
	case o.start && kafkaBrokers != "":
		return errors.New("-kafka and -kafka-brokers: one Kafka reference at a time")
	case o.start && kfake:
		return errors.New("-kafka and -kfake: one reference at a time, so that the report has one ratio column")
	case o.nodes != 1 && o.nodes != 3:
		return fmt.Errorf("-kafka-nodes %d: 1 or 3", o.nodes)
	case o.rf < 0 || o.rf > 32767:
		return fmt.Errorf("-kafka-rf %d: 0 (the default) or a replication factor", o.rf)
	case o.start && o.rf > o.nodes:
		return fmt.Errorf("-kafka-rf %d: above the %d brokers of -kafka-nodes", o.rf, o.nodes)
	case o.metadata && (!o.start || sidecarBin == ""):
		return errors.New("-sidecar-metadata-kafka needs -kafka and -sidecar-bin (the tool starts both)")
	}
	if _, err := parseHeap(o.heap); err != nil {
		return fmt.Errorf("-kafka-heap: %w", err)
	}
	return nil
}

// parseHeap checks a JVM heap size such as 512m or 2g.
func parseHeap(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) < 2 || !strings.ContainsAny(s[len(s)-1:], "mg") {
		return "", fmt.Errorf("%q: want a size such as 512m or 2g", s)
	}
	if n, err := strconv.Atoi(s[:len(s)-1]); err != nil || n <= 0 {
		return "", fmt.Errorf("%q: want a size such as 512m or 2g", s)
	}
	return s, nil
}

// kafkaRF is the load topic's replication factor on Kafka.
func (o kafkaOptions) kafkaRF() int16 {
	switch {
	case o.rf > 0:
		return int16(o.rf)
	case o.start:
		return int16(min(o.nodes, 3))
	}
	return 1
}

// kafkaTarget is the Target of an Apache Kafka reference: its topic laid
// out as o says, its brokers' process ids for the CPU figures.
func (o kafkaOptions) kafkaTarget(brokers []string, pids []int, noCPU string) Target {
	rf := o.kafkaRF()
	minISR := strconv.Itoa(max(1, int(rf)-1))
	return Target{Name: "kafka", Brokers: brokers, NoMetrics: "Apache Kafka has no object store",
		PIDs: pids, NoCPU: noCPU, ReplicationFactor: rf, TopicConfigs: map[string]*string{"min.insync.replicas": &minISR}}
}

// kafkaCluster is an Apache Kafka cluster the tool started.
type kafkaCluster struct {
	c    *kafkatest.Cluster
	keep bool
}

// startKafka starts the -kafka cluster; info receives what was started.
func startKafka(o kafkaOptions, keep bool, info io.Writer) (*kafkaCluster, error) {
	heap, _ := parseHeap(o.heap)
	t0 := time.Now()
	fmt.Fprintf(info, "kafka: starting Apache Kafka %s, %d node(s), heap %s each ...\n", kafkatest.Version, o.nodes, heap)
	c, err := kafkatest.StartShared(kafkatest.Options{
		Brokers:      o.nodes,
		JVMOptions:   kafkatest.ProductionJVM(heap),
		StartTimeout: 5 * time.Minute,
	}, func(format string, args ...any) { fmt.Fprintf(info, format+"\n", args...) })
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(info, "kafka: %s serving after %v (pids %v), directory %s\n", c.BootstrapServers(),
		time.Since(t0).Round(time.Millisecond), kafkaPIDs(c), c.Dir())
	return &kafkaCluster{c: c, keep: keep}, nil
}

// kafkaPIDs are the started cluster's broker processes.
func kafkaPIDs(c *kafkatest.Cluster) []int {
	var pids []int
	for _, id := range c.Brokers() {
		if p := c.PID(id); p > 0 {
			pids = append(pids, p)
		}
	}
	return pids
}

// target is the started cluster as the Kafka reference.
func (k *kafkaCluster) target(o kafkaOptions) Target {
	return o.kafkaTarget(strings.Split(k.c.BootstrapServers(), ","), kafkaPIDs(k.c), "")
}

// metadataSets are the settings that put a started sidecar's metadata log
// on the cluster (-sidecar-metadata-kafka), in a metadata topic of its own
// (each store's sidecar starts from an empty log: its objects are in its
// own store).
func (k *kafkaCluster) metadataSets(o kafkaOptions, store, runTopic string) []string {
	return []string{
		"diskless.metadata.log=kafka",
		"diskless.metadata.kafka.bootstrap.servers=" + k.c.BootstrapServers(),
		"diskless.metadata.topic=__diskless_metadata-" + runTopic + "-" + store,
		"diskless.metadata.topic.replication.factor=" + strconv.Itoa(min(o.nodes, 3)),
	}
}

// stop stops the cluster, keeping its directory with -keep-rig.
func (k *kafkaCluster) stop() error { return k.c.Close(k.keep) }
