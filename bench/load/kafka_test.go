package main

import (
	"bytes"
	"os"
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
