package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// TestRunKafka drives a real Apache Kafka broker (internal/kafkatest, one
// node) as -kafka-brokers does, with its process id for the CPU figures:
// records flow both ways and the broker's CPU time in the window is
// measured and put per GiB produced and per core.
func TestRunKafka(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Options{})
	pid := c.PID(c.Brokers()[0])
	if pid == 0 {
		t.Fatal("no broker process id")
	}
	cfg := smallConfig()
	res, err := run(t.Context(), cfg, Target{Name: "kafka", Brokers: strings.Split(c.BootstrapServers(), ","),
		NoMetrics: "Apache Kafka has no object store", PIDs: []int{pid}})
	if err != nil {
		t.Fatal(err)
	}
	var report bytes.Buffer
	writeReport(&report, cfg, []Result{res})
	t.Logf("report:%s", report.String())
	if res.Produced.RecordsPerSec <= 0 || res.Consumed == nil || res.Consumed.RecordsPerSec <= 0 {
		t.Fatalf("produced %+v, consumed %+v: want records both ways", res.Produced, res.Consumed)
	}
	checkLatency(t, "produce", res.ProduceLatency)
	cpu := res.CPU
	if cpu.NA != "" || cpu.Seconds == nil || *cpu.Seconds <= 0 || cpu.PerGiB == nil || cpu.MBPerCore == nil {
		t.Fatalf("CPU figures %+v, want the broker's CPU seconds, per GiB and per core", cpu)
	}
	gib := float64(res.Produced.Bytes) / (1 << 30)
	if !near(*cpu.PerGiB, *cpu.Seconds/gib) || !near(*cpu.MBPerCore, float64(res.Produced.Bytes)/1e6 / *cpu.Seconds) {
		t.Fatalf("CPU figures %+v inconsistent with %d bytes produced", cpu, res.Produced.Bytes)
	}
	for _, want := range []string{"server CPU s", "CPU s per GiB produced", "produced MB/s per core"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestProcessCPU: this process's CPU time grows while it spins, and a
// process that does not exist is an error naming it.
func TestProcessCPU(t *testing.T) {
	pid := []int{osPID()}
	before, err := processesCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the clock ticks twice: on a loaded machine 100 ms of
	// spinning may get less than one tick of CPU.
	after := before
	for deadline := time.Now().Add(time.Minute); after < before+2*time.Second/clockTicks; {
		if time.Now().After(deadline) {
			t.Fatalf("CPU time %v, still %v after a minute of spinning", before, after)
		}
		for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
		}
		if after, err = processesCPU(pid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := processCPU(1 << 30); err == nil || !strings.Contains(err.Error(), "1073741824") {
		t.Fatalf("a missing process: %v", err)
	}
	if _, err := parsePIDs("12,x"); err == nil {
		t.Fatal("a bad process id accepted")
	}
}

func osPID() int { return os.Getpid() }

// TestKafkaFlag runs the tool as `-sidecar-bin … -stores local -kafka
// -sidecar-metadata-kafka` does: it starts Apache Kafka itself, then a
// sidecar whose metadata log is on that Kafka, drives the sidecar and then
// Kafka with the identical load, and reports both side by side — each
// server's CPU, and the brokers' CPU during the sidecar's window as its
// peer's — then stops everything.
func TestKafkaFlag(t *testing.T) {
	kafkatest.Require(t)
	bin := filepath.Join(t.TempDir(), "sidecar")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/sidecar").CombinedOutput(); err != nil {
		t.Fatalf("building the sidecar: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	code := mainCode([]string{"-sidecar-bin", bin, "-stores", "local", "-kafka", "-sidecar-metadata-kafka",
		"-sidecar-set", "diskless.append.commit.interval.ms=100",
		"-partitions", "3", "-producers", "2", "-consumers", "2", "-record-size", "200", "-rate", "2000",
		"-warmup", "300ms", "-duration", "2s", "-drain", "2m", "-quiet", "-json"}, &stdout, &stderr)
	out := stdout.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var rep jsonReport
	if err := json.Unmarshal([]byte(out[strings.Index(out, "\n{")+1:]), &rep); err != nil {
		t.Fatalf("the JSON report: %v", err)
	}
	if len(rep.Results) != 2 || rep.Results[0].Target != storeLocal || rep.Results[1].Target != "kafka" {
		t.Fatalf("targets %+v, want the local store's sidecar, then kafka", rep.Results)
	}
	for _, r := range rep.Results {
		if r.ErrorCount != 0 || r.Unacked != 0 || r.Unconsumed != 0 || r.Produced.Records == 0 || r.CPU.Seconds == nil {
			t.Errorf("%s: %d errors %v, %d unacked, %d unconsumed, %d produced, CPU %+v", r.Target, r.ErrorCount, r.Errors,
				r.Unacked, r.Unconsumed, r.Produced.Records, r.CPU)
		}
	}
	sc := rep.Results[0]
	if sc.PeerCPU == nil || sc.PeerCPU.Seconds == nil || *sc.PeerCPU.Seconds <= 0 || !strings.Contains(sc.Peer, "metadata log") {
		t.Errorf("the sidecar's peer CPU %+v (%q): want the brokers' CPU during its window", sc.PeerCPU, sc.Peer)
	}
	if rep.Results[1].PeerCPU != nil {
		t.Errorf("kafka has a peer: %+v", rep.Results[1].PeerCPU)
	}
	for _, want := range []string{"kafka: starting Apache Kafka", "diskless.metadata.log=kafka", "CPU s per GiB, with peer", "MB/s per core (of"} {
		if !strings.Contains(out, want) && !strings.Contains(stderr.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestKafkaFlags: the Kafka reference's flags and the topic layout they
// give.
func TestKafkaFlags(t *testing.T) {
	var stderr bytes.Buffer
	_, o, err := parseFlags([]string{"-kafka", "-kafka-nodes", "3", "-kafka-heap", "2g"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	tg := o.kafka.kafkaTarget([]string{"x:1"}, nil, "")
	if tg.ReplicationFactor != 3 || *tg.TopicConfigs["min.insync.replicas"] != "2" {
		t.Errorf("-kafka -kafka-nodes 3: RF %d, min.insync.replicas %s; want 3 and 2", tg.ReplicationFactor, *tg.TopicConfigs["min.insync.replicas"])
	}
	_, o, err = parseFlags([]string{"-kafka-brokers", "x:1"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if tg := o.kafka.kafkaTarget([]string{"x:1"}, nil, ""); tg.ReplicationFactor != 1 || *tg.TopicConfigs["min.insync.replicas"] != "1" {
		t.Errorf("-kafka-brokers: RF %d, want 1 (min.insync.replicas 1)", tg.ReplicationFactor)
	}
	for _, bad := range [][]string{
		{"-kafka", "-kafka-brokers", "x:1"},
		{"-kafka", "-kfake"},
		{"-kafka", "-kafka-nodes", "2"},
		{"-kafka", "-kafka-rf", "3"},
		{"-kafka", "-kafka-heap", "lots"},
		{"-kafka", "-sidecar-metadata-kafka"},
		{"-sidecar-bin", "x", "-sidecar-metadata-kafka"},
	} {
		if _, _, err := parseFlags(bad, &stderr); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
