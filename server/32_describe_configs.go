package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeConfigsVersions: DescribeConfigs 0–4, all of kmsg's versions.
var describeConfigsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 32, MinVersion: 0, MaxVersion: 4}

// handleDescribeConfigs answers DescribeConfigs for topics: every config
// the sidecar acts on with its effective value (source DEFAULT_CONFIG)
// and every config set on the topic (DYNAMIC_TOPIC_CONFIG), or only those
// named in ConfigNames. A broker resource is answered with no configs (the
// sidecar's own configuration is its properties file, not Kafka's broker
// configs); other resource types get INVALID_REQUEST; an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION.
func (s *Server) handleDescribeConfigs(_ context.Context, req *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t, ok := s.catalog.Topic(rr.ResourceName)
			if !ok {
				out.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			var want map[string]bool
			if rr.ConfigNames != nil {
				want = make(map[string]bool, len(rr.ConfigNames))
				for _, n := range rr.ConfigNames {
					want[n] = true
				}
			}
			for _, e := range topicConfigs(t.Config) {
				if want != nil && !want[e.name] {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value = e.name, kmsg.StringPtr(e.value)
				c.Source, c.IsDefault = e.source(), !e.set
				out.Configs = append(out.Configs, c)
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		default:
			out.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}
