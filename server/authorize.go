package server

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/acl"
)

// ACLStore is where the access control entries are kept (the
// coordinators' shard 0, record 117; SPEC §14, ACLs): the authorizer
// reads them through its acl.Source, CreateAcls, DescribeAcls and
// DeleteAcls through this.
type ACLStore interface {
	// ACLs returns the entries held here, sorted by acl.Compare; the
	// slice is shared and never changed.
	ACLs() []acl.Binding
	// CreateACLs adds bindings (each valid) together once durable; one
	// held already is kept. Errors (nothing changed):
	// diskless.ErrNotCoordinator where another sidecar hosts shard 0,
	// ctx's, a storage failure.
	CreateACLs(ctx context.Context, bindings []acl.Binding) error
	// DeleteACLs removes what filters (each valid) select, together once
	// durable, and returns each filter's selection. Errors as
	// CreateACLs's.
	DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error)
}

// Shorthands for the resource types and operations of the checks.
const (
	rtTopic   = kmsg.ACLResourceTypeTopic
	rtGroup   = kmsg.ACLResourceTypeGroup
	rtCluster = kmsg.ACLResourceTypeCluster
	rtTxnID   = kmsg.ACLResourceTypeTransactionalId

	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
)

// aclRequest is who sent the request of ctx: its connection's principal
// and the client's address.
func aclRequest(ctx context.Context) acl.Request {
	p := PrincipalOf(ctx)
	if p == "" {
		p = AnonymousPrincipal
	}
	return acl.Request{Principal: p, Host: strings.TrimPrefix(clientOf(ctx).host, "/")}
}

// authzOff reports whether the request of ctx is not checked: no
// authorizer is configured (every request is allowed, as before ACLs).
// A request another sidecar forwards is checked twice: there with the
// client's principal, here with the forwarding sidecar's (User:ANONYMOUS
// from its address: the sidecars' own requests are not authenticated yet,
// DESIGN §Security), never trusted for its client id, which any client
// can send.
func (s *Server) authzOff(context.Context) bool {
	return s.cfg.Authorizer == nil
}

// authorized reports whether the request of ctx may do op on the resource
// of type rt named name (acl.ClusterName for the cluster).
func (s *Server) authorized(ctx context.Context, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if s.authzOff(ctx) {
		return true
	}
	return s.cfg.Authorizer.Authorize(aclRequest(ctx), op, rt, name)
}

// authorizedCluster reports whether the request of ctx may do op on the
// cluster.
func (s *Server) authorizedCluster(ctx context.Context, op kmsg.ACLOperation) bool {
	return s.authorized(ctx, op, rtCluster, acl.ClusterName)
}

// authorizedOps returns the bits of ops (1<<operation, KIP-430's
// authorized operations) the request of ctx may do on the resource: all
// of them without an authorizer.
func (s *Server) authorizedOps(ctx context.Context, ops int32, rt kmsg.ACLResourceType, name string) int32 {
	if s.authzOff(ctx) {
		return ops
	}
	var out int32
	for op := kmsg.ACLOperationRead; op <= kmsg.ACLOperationDescribeTokens; op++ {
		if ops&(1<<op) != 0 && s.authorized(ctx, op, rt, name) {
			out |= 1 << op
		}
	}
	return out
}
