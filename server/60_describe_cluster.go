package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/acl"
)

// describeClusterVersions: DescribeCluster 0–2, all of kmsg's versions (as
// Kafka 4.x); v1 adds the endpoint type, v2 fenced brokers.
var describeClusterVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 60, MinVersion: 0, MaxVersion: 2}

// handleDescribeCluster answers DescribeCluster as Kafka 4.4 does for a
// broker listener (observed): endpoint type 1 (brokers), the cluster id,
// this sidecar as the controller and the live sidecars as the brokers
// (the one sidecar without a Cluster; not fenced), and −2^31 authorized operations unless they were asked for.
// An endpoint type other than brokers (the controllers, 2) is
// UNSUPPORTED_ENDPOINT_TYPE: the sidecar has no controller listener.
func (s *Server) handleDescribeCluster(ctx context.Context, req *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 1
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = 119 // UNSUPPORTED_ENDPOINT_TYPE
		resp.ErrorMessage = kmsg.StringPtr("the sidecar serves only the brokers endpoint type")
		return resp
	}
	sidecars := s.sidecars(ctx)
	for _, sc := range sidecars {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = sc.NodeID, sc.Host, sc.Port
		if sc.Rack != "" {
			b.Rack = kmsg.StringPtr(sc.Rack)
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	resp.ClusterID = s.cfg.ClusterID
	resp.ControllerID = s.controllerAmong(sidecars)
	resp.ClusterAuthorizedOperations = -2147483648
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = s.authorizedOps(ctx, clusterAuthorizedOps, rtCluster, acl.ClusterName)
	}
	return resp
}
