package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
)

// The SCRAM credentials (record 116; SPEC §14, SCRAM) live in shard 0's
// state beside the catalog, so every sidecar finds them: the owner's
// driver writes them, the other sidecars' replicas of shard 0 follow
// them (DESIGN §Read replicas), and a login anywhere reads them under
// shard 0's read lock.

// scramKey names one credential: a user's, of one mechanism.
type scramKey struct {
	user string
	mech diskless.ScramMechanism
}

func compareScramKey(a, b scramKey) int {
	if c := strings.Compare(a.user, b.user); c != 0 {
		return c
	}
	return cmp.Compare(a.mech, b.mech)
}

// checkScram checks record 116 against the state (what apply requires).
func (s *state) checkScram(r *records.ScramCredential) error {
	k := scramKey{r.Name, diskless.ScramMechanism(r.Mechanism)}
	if !diskless.ValidScramUser(r.Name) || k.mech.KeySize() == 0 {
		return inconsistent("SCRAM credential of user %q, mechanism %d: invalid", r.Name, r.Mechanism)
	}
	if r.Iterations == 0 {
		if len(r.Salt)+len(r.StoredKey)+len(r.ServerKey) != 0 {
			return inconsistent("SCRAM credential removal with key material")
		}
		if _, ok := s.scram[k]; !ok {
			return inconsistent("SCRAM credential of user %q, %s removed but not held", r.Name, k.mech.Name())
		}
		return nil
	}
	c := diskless.ScramCredential{Mechanism: k.mech, Iterations: r.Iterations, Salt: r.Salt, StoredKey: r.StoredKey, ServerKey: r.ServerKey}
	if !c.Valid() {
		return inconsistent("SCRAM credential of user %q, %s: invalid salt, keys or iterations", r.Name, k.mech.Name())
	}
	return nil
}

func (s *state) applyScramCredential(r *records.ScramCredential) error {
	if err := s.checkScram(r); err != nil {
		return err
	}
	k := scramKey{r.Name, diskless.ScramMechanism(r.Mechanism)}
	if r.Iterations == 0 {
		delete(s.scram, k)
		if len(s.scram) == 0 {
			s.scram = nil
		}
		return nil
	}
	if s.scram == nil {
		s.scram = make(map[scramKey]diskless.ScramCredential)
	}
	s.scram[k] = diskless.ScramCredential{Mechanism: k.mech, Iterations: r.Iterations, Salt: r.Salt, StoredKey: r.StoredKey, ServerKey: r.ServerKey}
	return nil
}

// ScramCredential returns user's credential of mech, as shard 0 holds it
// here: its owner's state, or this sidecar's replica of it, which is a
// moment behind. ok is false for none, or while shard 0 has failed.
func (c *Coordinator) ScramCredential(user string, mech diskless.ScramMechanism) (cred diskless.ScramCredential, ok bool) {
	s := c.shards[0]
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.failed != nil || s.mu.st == nil {
		return diskless.ScramCredential{}, false
	}
	cred, ok = s.mu.st.scram[scramKey{user, mech}]
	return cred, ok
}

// ScramUsers returns the mechanisms and iteration counts of every
// user's credentials (DescribeUserScramCredentials: no key material),
// by user, each user's by mechanism.
func (c *Coordinator) ScramUsers() map[string][]diskless.ScramCredential {
	s := c.shards[0]
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string][]diskless.ScramCredential{}
	if s.mu.failed != nil || s.mu.st == nil {
		return out
	}
	keys := slices.SortedFunc(maps.Keys(s.mu.st.scram), compareScramKey)
	for _, k := range keys {
		cr := s.mu.st.scram[k]
		out[k.user] = append(out[k.user], diskless.ScramCredential{Mechanism: k.mech, Iterations: cr.Iterations})
	}
	return out
}

// AlterScramCredentials applies changes (each user at most once, each
// credential Valid, checked by the caller) on shard 0 as one group of
// records 116, durable before any login sees them, and returns each
// change's outcome: nil, or kerr.ResourceNotFound for the removal of a
// credential shard 0 does not hold (that change alone is dropped, as
// Kafka drops it). err is the shard's (diskless.ErrNotCoordinator where
// another sidecar hosts shard 0, ErrClosed, ctx's, a storage failure):
// then nothing changed.
func (c *Coordinator) AlterScramCredentials(ctx context.Context, changes []diskless.ScramChange) (results []error, err error) {
	for _, ch := range changes {
		if !diskless.ValidScramUser(ch.User) || ch.Credential.Mechanism.KeySize() == 0 || (!ch.Remove && !ch.Credential.Valid()) {
			return nil, fmt.Errorf("coordinator: invalid SCRAM change for user %q", ch.User)
		}
	}
	resp := c.shards[0].do(&request{ctx: ctx, deferred: true, build: func(st *state) ([]records.Record, error) {
		results = make([]error, len(changes))
		var recs []records.Record
		for i, ch := range changes {
			r := &records.ScramCredential{Name: ch.User, Mechanism: int8(ch.Credential.Mechanism)}
			if ch.Remove {
				if _, ok := st.scram[scramKey{ch.User, ch.Credential.Mechanism}]; !ok {
					results[i] = kerr.ResourceNotFound
					continue
				}
			} else {
				r.Iterations, r.Salt = ch.Credential.Iterations, ch.Credential.Salt
				r.StoredKey, r.ServerKey = ch.Credential.StoredKey, ch.Credential.ServerKey
			}
			recs = append(recs, r)
		}
		return recs, nil
	}})
	if resp.err != nil {
		return nil, resp.err
	}
	return results, nil
}

// appendScramSnapshot encodes the credentials as snapshot tag 4
// (docs/format/metadata-records.md §Snapshots), by (Name, Mechanism), each
// as record 116's fields; nil when there are none.
func appendScramSnapshot(m map[scramKey]diskless.ScramCredential) []byte {
	if len(m) == 0 {
		return nil
	}
	keys := slices.SortedFunc(maps.Keys(m), compareScramKey)
	b := kbin.AppendCompactArrayLen(nil, len(keys))
	for _, k := range keys {
		cr := m[k]
		r := records.ScramCredential{Name: k.user, Mechanism: int8(k.mech), Iterations: cr.Iterations,
			Salt: cr.Salt, StoredKey: cr.StoredKey, ServerKey: cr.ServerKey}
		b = r.AppendTo(b)
	}
	return b
}

// readScramSnapshot reads snapshot tag 4 into s, checking each credential
// as record 116 is checked and the order.
func (s *state) readScramSnapshot(r *kbin.Reader) error {
	n, err := records.ReadArrayLen(r, 1+1+4+1+1+1+1)
	if err != nil {
		return err
	}
	var prev *scramKey
	for range n {
		var rec records.ScramCredential
		if err := rec.ReadFrom(r); err != nil {
			return err
		}
		k := scramKey{rec.Name, diskless.ScramMechanism(rec.Mechanism)}
		if prev != nil && compareScramKey(*prev, k) >= 0 {
			return errors.New("SCRAM credentials out of order")
		}
		prev = &k
		if rec.Iterations == 0 {
			return fmt.Errorf("SCRAM credential of user %q without iterations", rec.Name)
		}
		if err := s.applyScramCredential(&rec); err != nil {
			return err
		}
	}
	return records.OKOrTruncated(r)
}
