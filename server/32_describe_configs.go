package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeConfigsVersions: DescribeConfigs 0–4, all of kmsg's versions.
var describeConfigsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 32, MinVersion: 0, MaxVersion: 4}

// handleDescribeConfigs answers DescribeConfigs for topics as Kafka 4.4
// does (describeTopic: the 37 topic configs with sources and, from v1 when
// asked, synonyms; types from v3), plus diskless.enable,
// diskless.disable.policy and the read-only diskless.state and
// diskless.state.epoch (SPEC §10), or only the configs named in
// ConfigNames (an unknown name is left out). A broker resource is
// answered with no configs (the sidecar's own configuration is its
// properties file, not Kafka's broker configs); other resource types get
// INVALID_REQUEST; an unknown topic UNKNOWN_TOPIC_OR_PARTITION, an empty
// name INVALID_TOPIC_EXCEPTION.
func (s *Server) handleDescribeConfigs(_ context.Context, req *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if rr.ResourceName == "" {
				out.ErrorCode = kerr.InvalidTopicException.Code
				out.ErrorMessage = kmsg.StringPtr("Topic name is invalid: the empty string is not allowed")
				break
			}
			t, ok := s.catalog.Topic(rr.ResourceName)
			if !ok {
				out.ErrorCode = kerr.UnknownTopicOrPartition.Code
				out.ErrorMessage = kmsg.StringPtr("")
				break
			}
			var want map[string]bool
			if rr.ConfigNames != nil {
				want = make(map[string]bool, len(rr.ConfigNames))
				for _, n := range rr.ConfigNames {
					want[n] = true
				}
			}
			for _, e := range describeTopic(t) {
				if want != nil && !want[e.name] {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value = e.name, kmsg.StringPtr(e.value)
				c.Source, c.ReadOnly = e.source, e.readOnly
				if req.Version == 0 {
					// v0 has no source; isDefault tells set from default.
					c.IsDefault = e.source != kmsg.ConfigSourceDynamicTopicConfig
				}
				if req.IncludeSynonyms {
					c.ConfigSynonyms = e.synonyms
				}
				c.ConfigType = e.typ
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
