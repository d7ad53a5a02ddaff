package produce

import (
	"cmp"
	"slices"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// orderKey is what the commit order keeps in seal order (DESIGN §Produce
// step 6, DESIGN invariant 4): one producer's batches of one partition.
// Batches without a producer id (ProducerID -1: not idempotent) share the
// key of their partition, so they keep seal order among themselves.
type orderKey struct {
	topic      diskless.TopicID
	partition  int32
	producerID int64
}

// commitOrder decides when a sealed file may be committed: once every
// earlier file (in seal order) that holds a batch of one of its keys has
// finished — committed, or failed and answered — so that, per key, files
// are decided in seal order, as when every file waited for all earlier
// ones, while a file whose keys no unfinished earlier file holds does not
// wait behind a slow upload. It holds no lock and starts nothing: the
// committer goroutine alone uses it.
type commitOrder struct {
	// holders lists, per key, the unfinished files holding it, in seal
	// order; a file may commit when it heads the list of each of its keys.
	holders map[orderKey][]*file
}

func newCommitOrder() *commitOrder {
	return &commitOrder{holders: make(map[orderKey][]*file)}
}

// add registers f, sealed after every file added before, and reports
// whether none of them holds one of its keys unfinished. It sets f.keys
// to f's distinct keys, in order of first appearance: a key whose list
// already ends with f is one of f's seen before, so no set of its own is
// built (one map look-up per run of batches of one key).
func (o *commitOrder) add(f *file) bool {
	f.keys = make([]orderKey, 0, min(len(f.commits), 8))
	f.blockers = 0
	var last orderKey
	for i := range f.commits {
		b := &f.commits[i]
		k := orderKey{b.TopicID, b.Partition, b.ProducerID}
		if b.ProducerID < 0 {
			k.producerID = -1
		}
		if i > 0 && k == last {
			continue // a request's batches of one key come together
		}
		last = k
		q := o.holders[k]
		if n := len(q); n > 0 && q[n-1] == f {
			continue // a key of f's seen before
		}
		if len(q) > 0 {
			f.blockers++
		}
		o.holders[k] = append(q, f)
		f.keys = append(f.keys, k)
	}
	return f.blockers == 0
}

// finish removes f, which add registered, and returns the files that may
// commit now and could not before, in seal order.
func (o *commitOrder) finish(f *file) []*file {
	var freed []*file
	for _, k := range f.keys {
		q := o.holders[k]
		i := slices.Index(q, f)
		if i < 0 {
			panic("produce: commitOrder.finish of a file it does not hold")
		}
		q = slices.Delete(q, i, i+1)
		if len(q) == 0 {
			delete(o.holders, k)
			continue
		}
		o.holders[k] = q
		if i == 0 {
			// The next holder of k heads its list now.
			next := q[0]
			next.blockers--
			if next.blockers == 0 {
				freed = append(freed, next)
			}
		}
	}
	slices.SortFunc(freed, bySeq)
	return freed
}

// bySeq orders files by seal order.
func bySeq(a, b *file) int { return cmp.Compare(a.seq, b.seq) }
