package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

// incrementalAlterConfigsVersions: IncrementalAlterConfigs 0–1, all of
// kmsg's versions (as Kafka 4.x).
var incrementalAlterConfigsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 44, MinVersion: 0, MaxVersion: 1}

// handleIncrementalAlterConfigs answers IncrementalAlterConfigs (KIP-339)
// for topics: per resource, the operations SET (0), DELETE (1), APPEND (2)
// and SUBTRACT (3, list configs only) are applied in order to the topic's
// configs and the result, validated as CreateTopics validates, becomes the
// topic's configs (one catalog record; nothing with ValidateOnly).
// Refusals per resource, as Kafka 4.4 answers (observed): INVALID_CONFIG
// naming the key ("Unknown topic config name: x", a value that does not
// parse), UNKNOWN_TOPIC_OR_PARTITION "The topic 'x' does not exist.",
// INVALID_REQUEST for an unknown operation, a config named twice, or an
// unknown diskless.disable.policy (SPEC §10), REASSIGNMENT_IN_PROGRESS
// for a change of the disablement configs while the topic is DISABLING.
// diskless.enable=false starts the topic's disablement; true re-enables a
// DISABLED topic. Broker resources get INVALID_REQUEST: the sidecar's
// configuration is its properties file.
func (s *Server) handleIncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	if fwd, ok := s.forwardAdmin(ctx, req); ok {
		return fwd // the catalog is written at the controller
	}
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		ops := make([]configOp, len(rr.Configs))
		for i, c := range rr.Configs {
			ops[i] = configOp{name: c.Name, op: c.Op, value: c.Value}
		}
		out.ErrorCode, out.ErrorMessage = s.alterTopic(ctx, rr.ResourceType, rr.ResourceName, ops, false, req.ValidateOnly)
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

// configOp is one config of an alter request: an incremental operation,
// or (AlterConfigs) a value in the topic's whole new set.
type configOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

// alterTopic applies ops to a topic resource (replace: AlterConfigs, the
// ops are the whole new set) and returns the resource's error code and
// message (0 and nil on success).
func (s *Server) alterTopic(ctx context.Context, typ kmsg.ConfigResourceType, name string, ops []configOp, replace, validateOnly bool) (int16, *string) {
	fail := func(err *kerr.Error, format string, args ...any) (int16, *string) {
		return err.Code, kmsg.StringPtr(fmt.Sprintf(format, args...))
	}
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		return fail(kerr.InvalidRequest, "the sidecar's broker configs are its properties file; they cannot be altered through Kafka")
	default:
		return fail(kerr.InvalidRequest, "unsupported resource type %d", typ)
	}
	t, ok := s.catalog.Topic(name)
	if !ok {
		return fail(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", name)
	}
	names := make([]string, 0, len(ops))
	for _, o := range ops {
		if slices.Contains(names, o.name) {
			return fail(kerr.InvalidRequest, "Error due to duplicate config keys")
		}
		names = append(names, o.name)
		if o.name == disklessStateConfig || o.name == disklessStateEpochConfig {
			return fail(kerr.InvalidConfig, "topic config %s is read-only", o.name)
		}
		switch {
		case replace:
		case o.op < 0 || o.op > 3:
			return fail(kerr.InvalidRequest, "unknown operation %d for config %s", o.op, o.name)
		case (o.op == kmsg.IncrementalAlterConfigOpAppend || o.op == kmsg.IncrementalAlterConfigOpSubtract) && !listConfigs[o.name]:
			if _, err := topicconfig.Parse(map[string]string{o.name: "x"}); err != nil && strings.Contains(err.Error(), "unknown topic config") {
				return fail(kerr.InvalidConfig, "Unknown topic config name: %s", o.name)
			}
			return fail(kerr.InvalidConfig, "Config value append is not allowed for config key: %s", o.name)
		}
		if o.value == nil && (replace || o.op != kmsg.IncrementalAlterConfigOpDelete) {
			return fail(kerr.InvalidConfig, "Null value not supported for topic configs: %s", o.name)
		}
	}
	ch := diskless.ConfigChange{Names: names, ValidateOnly: validateOnly, Apply: func(cur map[string]string) (map[string]string, error) {
		if replace {
			cur = make(map[string]string, len(ops))
		}
		for _, o := range ops {
			switch {
			case replace || o.op == kmsg.IncrementalAlterConfigOpSet:
				cur[o.name] = *o.value
			case o.op == kmsg.IncrementalAlterConfigOpDelete:
				delete(cur, o.name)
			case o.op == kmsg.IncrementalAlterConfigOpAppend:
				cur[o.name] = appendList(cur[o.name], *o.value)
			case o.op == kmsg.IncrementalAlterConfigOpSubtract:
				cur[o.name] = subtractList(cur[o.name], *o.value)
				if cur[o.name] == "" {
					delete(cur, o.name)
				}
			}
		}
		return cur, nil
	}}
	changed, err := s.catalog.AlterTopicConfigs(ctx, t.ID, ch)
	if err != nil {
		code, msg := s.configErrorCode(name, err)
		return code, kmsg.StringPtr(msg)
	}
	if !validateOnly {
		s.log.Info("altered topic configs", "topic", name, "configs", names,
			"diskless_state", changed.Disablement.State.String(), "epoch", changed.Disablement.Epoch)
	}
	return 0, nil
}

func appendList(cur, add string) string {
	items := splitList(cur)
	for _, v := range splitList(add) {
		if !slices.Contains(items, v) {
			items = append(items, v)
		}
	}
	return strings.Join(items, ",")
}

func subtractList(cur, sub string) string {
	drop := splitList(sub)
	var out []string
	for _, v := range splitList(cur) {
		if !slices.Contains(drop, v) {
			out = append(out, v)
		}
	}
	return strings.Join(out, ",")
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
