package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/internal/acl"
)

// The access control entries (record 117; SPEC §14, ACLs) live in shard
// 0's state beside the catalog and the SCRAM credentials, so every
// sidecar's authorizer finds them: the owner's driver writes them, the
// other sidecars' replicas of shard 0 follow them (DESIGN §Read
// replicas). The state holds them as one sorted slice that a change
// replaces, never edits: the authorizer reads it on every decision
// without copying.

func aclOf(r *records.ACL) acl.Binding {
	return acl.Binding{
		ResourceType: kmsg.ACLResourceType(r.ResourceType), ResourceName: r.ResourceName,
		PatternType: kmsg.ACLResourcePatternType(r.PatternType), Principal: r.Principal, Host: r.Host,
		Operation: kmsg.ACLOperation(r.Operation), Permission: kmsg.ACLPermissionType(r.PermissionType),
	}
}

func aclRecord(b acl.Binding, removed bool) *records.ACL {
	return &records.ACL{
		ResourceType: int8(b.ResourceType), ResourceName: b.ResourceName, PatternType: int8(b.PatternType),
		Principal: b.Principal, Host: b.Host, Operation: int8(b.Operation), PermissionType: int8(b.Permission),
		Removed: removed,
	}
}

// applyACL applies record 117: it adds (or removes) an entry the state
// does not hold (holds), valid as CreateAcls requires.
func (s *state) applyACL(r *records.ACL) error {
	b := aclOf(r)
	if why := b.Refusal(); why != "" {
		return inconsistent("ACL %+v: %s", b, why)
	}
	i, held := slices.BinarySearchFunc(s.acls, b, acl.Compare)
	switch {
	case r.Removed && !held:
		return inconsistent("ACL %+v removed but not held", b)
	case !r.Removed && held:
		return inconsistent("ACL %+v added twice", b)
	case r.Removed:
		s.acls = slices.Delete(slices.Clone(s.acls), i, i+1)
		if len(s.acls) == 0 {
			s.acls = nil
		}
	default:
		s.acls = slices.Insert(slices.Clip(s.acls), i, b)
	}
	return nil
}

// ACLs returns the access control entries shard 0 holds here (its
// owner's, or this sidecar's replica, a moment behind), sorted by
// acl.Compare; nil for none or while shard 0 has failed. The slice is
// never changed: callers must not change it either.
func (c *Coordinator) ACLs() []acl.Binding {
	s := c.shards[0]
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.failed != nil || s.mu.st == nil {
		return nil
	}
	return s.mu.st.acls
}

// CreateACLs adds bindings (none with a Refusal, checked by the caller) on shard 0
// as one group of records 117, applied only once durable; a binding held
// already, or named twice, is written once. err is the shard's
// (diskless.ErrNotCoordinator where another sidecar hosts shard 0,
// ErrClosed, ctx's, a storage failure): then nothing changed.
func (c *Coordinator) CreateACLs(ctx context.Context, bindings []acl.Binding) error {
	for _, b := range bindings {
		if why := b.Refusal(); why != "" {
			return fmt.Errorf("coordinator: invalid ACL %+v: %s", b, why)
		}
	}
	resp := c.shards[0].do(&request{ctx: ctx, deferred: true, build: func(st *state) ([]records.Record, error) {
		var recs []records.Record
		var added []acl.Binding
		for _, b := range bindings {
			if _, held := slices.BinarySearchFunc(st.acls, b, acl.Compare); held || slices.Contains(added, b) {
				continue
			}
			added = append(added, b)
			recs = append(recs, aclRecord(b, false))
		}
		return recs, nil
	}})
	return resp.err
}

// DeleteACLs removes every binding one of filters (none with a Refusal) selects,
// on shard 0 as one group of records 117 (each binding once), applied only
// once durable, and returns each filter's selection, sorted by
// acl.Compare (a binding two filters select is in both). err as
// CreateACLs's: then nothing changed.
func (c *Coordinator) DeleteACLs(ctx context.Context, filters []acl.Filter) (matched [][]acl.Binding, err error) {
	for _, f := range filters {
		if why := f.Refusal(); why != "" {
			return nil, fmt.Errorf("coordinator: invalid ACL filter %+v: %s", f, why)
		}
	}
	resp := c.shards[0].do(&request{ctx: ctx, deferred: true, build: func(st *state) ([]records.Record, error) {
		matched = make([][]acl.Binding, len(filters))
		gone := map[acl.Binding]bool{}
		var recs []records.Record
		for i, f := range filters {
			for _, b := range st.acls {
				if !f.Matches(b) {
					continue
				}
				matched[i] = append(matched[i], b)
				if !gone[b] {
					gone[b] = true
					recs = append(recs, aclRecord(b, true))
				}
			}
		}
		return recs, nil
	}})
	if resp.err != nil {
		return nil, resp.err
	}
	return matched, nil
}

// appendACLSnapshot encodes the entries as snapshot tag 5
// (docs/format/metadata-records.md §Snapshots): sorted, each as record
// 117's fields; nil when there are none.
func appendACLSnapshot(bs []acl.Binding) []byte {
	if len(bs) == 0 {
		return nil
	}
	b := kbin.AppendCompactArrayLen(nil, len(bs))
	for _, x := range bs {
		b = aclRecord(x, false).AppendTo(b)
	}
	return b
}

// readACLSnapshot reads snapshot tag 5 into s, checking each entry as
// record 117 is checked, and the order.
func (s *state) readACLSnapshot(r *kbin.Reader) error {
	n, err := records.ReadArrayLen(r, 1+1+1+1+1+1+1+1+1+1)
	if err != nil {
		return err
	}
	for range n {
		var rec records.ACL
		if err := rec.ReadFrom(r); err != nil {
			return err
		}
		if rec.Removed {
			return errors.New("ACL snapshot entry marked removed")
		}
		if len(s.acls) > 0 && acl.Compare(s.acls[len(s.acls)-1], aclOf(&rec)) >= 0 {
			return errors.New("ACLs out of order")
		}
		if err := s.applyACL(&rec); err != nil {
			return err
		}
	}
	return records.OKOrTruncated(r)
}
