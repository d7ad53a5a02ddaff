package kafkatest

import (
	"strings"
	"testing"
	"time"
)

// TestOptionsNormalise: the defaults Start applies, and the options it
// refuses (naming the key or field).
func TestOptionsNormalise(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Options
		want    Options // compared field by field below
		wantErr string
	}{
		{name: "zero", in: Options{}, want: Options{Brokers: 1, Host: "127.0.0.1", StartTimeout: 2 * time.Minute}},
		{name: "separate one broker", in: Options{SeparateControllers: true}, want: Options{Brokers: 1, Controllers: 1, SeparateControllers: true, Host: "127.0.0.1", StartTimeout: 2 * time.Minute}},
		{name: "separate three brokers", in: Options{Brokers: 3, SeparateControllers: true}, want: Options{Brokers: 3, Controllers: 3, SeparateControllers: true, Host: "127.0.0.1", StartTimeout: 2 * time.Minute}},
		{name: "controllers ignored when combined", in: Options{Brokers: 3, Controllers: 5}, want: Options{Brokers: 3, Host: "127.0.0.1", StartTimeout: 2 * time.Minute}},
		{name: "negative brokers", in: Options{Brokers: -1}, wantErr: "Brokers -1"},
		{name: "bad host", in: Options{Host: "localhost"}, wantErr: `Host "localhost"`},
		{name: "reserved broker key", in: Options{BrokerConfig: map[string]string{"listeners": "x"}}, wantErr: "config listeners"},
		{name: "reserved controller key", in: Options{ControllerConfig: map[string]string{"controller.quorum.voters": "x"}}, wantErr: "config controller.quorum.voters"},
		{name: "reserved node key", in: Options{NodeConfig: map[int32]map[string]string{1: {"node.id": "7"}}}, wantErr: "config node.id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.in
			err := o.normalise()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Brokers != tc.want.Brokers || o.Controllers != tc.want.Controllers || o.SeparateControllers != tc.want.SeparateControllers ||
				o.Host != tc.want.Host || o.StartTimeout != tc.want.StartTimeout {
				t.Fatalf("normalised %+v, want %+v", o, tc.want)
			}
		})
	}
}

// TestProperties: a combined node's and a separate controller's
// server.properties, with the overrides in their order of precedence.
func TestProperties(t *testing.T) {
	o := Options{Brokers: 3, SeparateControllers: true,
		BrokerConfig:     map[string]string{"num.partitions": "4", "broker.rack": "all"},
		ControllerConfig: map[string]string{"broker.session.timeout.ms": "9000"},
		NodeConfig:       map[int32]map[string]string{2: {"broker.rack": "b"}}}
	if err := o.normalise(); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{opts: o}
	b := &node{id: 2, host: "127.0.0.1", broker: true, port: 9092, dir: "/d/node-2"}
	got := c.properties(b, "3001@127.0.0.1:9093")
	for _, want := range []string{
		"process.roles=broker\n", "node.id=2\n", "listeners=PLAINTEXT://127.0.0.1:9092\n",
		"advertised.listeners=PLAINTEXT://127.0.0.1:9092\n", "controller.quorum.voters=3001@127.0.0.1:9093\n",
		"controller.listener.names=CONTROLLER\n", "log.dirs=/d/node-2/data\n", "num.partitions=4\n",
		"broker.rack=b\n", "offsets.topic.replication.factor=3\n", "transaction.state.log.min.isr=2\n",
		"group.initial.rebalance.delay.ms=0\n", "broker.session.timeout.ms=4000\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("broker 2's properties lack %q:\n%s", want, got)
		}
	}
	ctl := &node{id: 3001, host: "127.0.0.1", controller: true, ctrlPort: 9093, dir: "/d/node-3001"}
	got = c.properties(ctl, "3001@127.0.0.1:9093")
	for _, want := range []string{"process.roles=controller\n", "listeners=CONTROLLER://127.0.0.1:9093\n", "broker.session.timeout.ms=9000\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("controller's properties lack %q:\n%s", want, got)
		}
	}
	for _, absent := range []string{"advertised.listeners", "num.partitions", "offsets.topic"} {
		if strings.Contains(got, absent) {
			t.Errorf("controller's properties have %s:\n%s", absent, got)
		}
	}
}
