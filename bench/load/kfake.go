package main

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
)

// startKfake starts franz-go's in-memory Kafka in this process: one broker
// (the sidecar is one node too) on 127.0.0.1 at a free port. The caller
// closes the cluster. kfake keeps every record in memory, so a long
// unthrottled run costs memory in proportion to the bytes produced.
func startKfake() (*kfake.Cluster, Target, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, Target{}, fmt.Errorf("start kfake: %w", err)
	}
	return c, Target{
		Name:      "kfake",
		Brokers:   c.ListenAddrs(),
		NoMetrics: "kfake has no object store",
		NoCPU:     "kfake runs in this process",
	}, nil
}
