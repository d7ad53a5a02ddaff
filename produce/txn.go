package produce

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.opentelemetry.io/otel/trace"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// Transactions on the produce path (DESIGN §Transactions, SPEC §15).
//
// A transactional batch is accepted only for a partition of its
// producer's open transaction (Config.Transactions) and is then committed
// like any batch, record 102 marking it TxnData. A transaction's markers
// go through the same pipeline (WriteMarkers): one control batch per
// partition, appended to the active file, committed in order with the
// data. The hazard is a transactional batch committed after its
// transaction's marker: it would open a transaction in the partition that
// no marker ever ends, and the last stable offset would stay behind it
// forever. The guard that holds across sidecars is the partition's shard:
// a batch's commit carries its transaction's token (CommitBatch.TxnSeq,
// from the check), a marker the token of the transaction it ends, and the
// shard refuses a batch whose token its producer's last marker there has
// reached. Within this sidecar, moreover, every transactional batch
// counts as in flight for its producer from before its check until its
// file is answered (txnBegin, txnDone), and WriteMarkers first waits until
// the producer has none in flight, so that a batch checked before the
// transaction left Ongoing is committed before the marker rather than
// refused after it.

// txnGate counts one producer's transactional batches in flight; zero is
// closed (and the gate dropped) when the count returns to 0.
type txnGate struct {
	n    int
	zero chan struct{}
}

// txnBegin counts one transactional batch of producer pid as in flight,
// before its check (txnCheck).
func (h *Handler) txnBegin(pid int64) {
	h.txnMu.Lock()
	defer h.txnMu.Unlock()
	g := h.txnMu.gates[pid]
	if g == nil {
		if h.txnMu.gates == nil {
			h.txnMu.gates = make(map[int64]*txnGate)
		}
		g = &txnGate{zero: make(chan struct{})}
		h.txnMu.gates[pid] = g
	}
	g.n++
}

// txnCheck asks the transaction coordinator whether the transactional
// batches txns (indexes into a.entries, each counted in flight by
// txnBegin) of a Produce request of version version, naming
// transactional id txnID, may be written: one check for all of them
// (Transactions.CheckTxnProduce), since a request's batches are all one
// producer's — one per (producer id, epoch) of its batches should a
// request mix them. An allowed batch becomes TxnData
// with the transaction's token; a refused one gets its partition's error,
// is counted out again and leaves a.
func (h *Handler) txnCheck(ctx context.Context, txnID string, version int16, a *accepted, txns []int) {
	var refused []bool // by entry, allocated at the first refusal
	for len(txns) > 0 {
		c0 := &a.entries[txns[0]].commit
		pid, epoch := c0.ProducerID, c0.ProducerEpoch
		group, rest := txns, []int(nil)
		if slices.ContainsFunc(txns, func(j int) bool {
			c := &a.entries[j].commit
			return c.ProducerID != pid || c.ProducerEpoch != epoch
		}) {
			group = nil
			for _, j := range txns {
				if c := &a.entries[j].commit; c.ProducerID == pid && c.ProducerEpoch == epoch {
					group = append(group, j)
				} else {
					rest = append(rest, j)
				}
			}
		}
		tps := make([]diskless.TopicPartition, len(group))
		for i, j := range group {
			tps[i] = diskless.TopicPartition{TopicID: a.entries[j].commit.TopicID, Partition: a.entries[j].commit.Partition}
		}
		seq, errs := h.cfg.Transactions.CheckTxnProduce(ctx, txnID, pid, epoch, tps)
		for i, j := range group {
			if errs != nil && errs[i] != nil {
				a.refs[j].resp.ErrorCode = txnStateError(errs[i], version).Code
				h.txnEnd(pid)
				if refused == nil {
					refused = make([]bool, len(a.entries))
				}
				refused[j] = true
				continue
			}
			a.entries[j].commit.Txn, a.entries[j].commit.TxnSeq = diskless.TxnData, seq
		}
		txns = rest
	}
	if refused == nil {
		return
	}
	n := 0
	for i := range a.entries {
		if refused[i] {
			a.size -= int64(len(a.entries[i].Batch))
			continue
		}
		a.entries[n], a.refs[n] = a.entries[i], a.refs[i]
		n++
	}
	clear(a.entries[n:])
	a.entries, a.refs = a.entries[:n], a.refs[:n]
}

// txnStateError is errc as a Produce request of version version answers
// it: INVALID_TXN_STATE — a transactional batch whose transaction is not
// open, refused by the check or, its marker first, by the partition's
// shard — is TRANSACTION_ABORTABLE from v11 (KIP-890, SPEC §15).
func txnStateError(errc *kerr.Error, version int16) *kerr.Error {
	if errc == kerr.InvalidTxnState && version >= 11 {
		return kerr.TransactionAbortable
	}
	return errc
}

// txnEnd counts one transactional batch of producer pid out.
func (h *Handler) txnEnd(pid int64) {
	h.txnMu.Lock()
	defer h.txnMu.Unlock()
	g := h.txnMu.gates[pid]
	if g.n--; g.n == 0 {
		close(g.zero)
		delete(h.txnMu.gates, pid)
	}
}

// txnDone counts out the transactional batches of entries (a request that
// was refused after txnBegin, or a file answered).
func (h *Handler) txnDone(entries []pendingEntry) {
	for i := range entries {
		if entries[i].commit.Txn == diskless.TxnData {
			h.txnEnd(entries[i].commit.ProducerID)
		}
	}
}

// txnDoneCommits is txnDone for a file's commits.
func (h *Handler) txnDoneCommits(commits []diskless.CommitBatch) {
	for i := range commits {
		if commits[i].Txn == diskless.TxnData {
			h.txnEnd(commits[i].ProducerID)
		}
	}
}

// waitTxnProduces returns once producer pid has no transactional batch in
// flight, or ctx is done (its error).
func (h *Handler) waitTxnProduces(ctx context.Context, pid int64) error {
	h.txnMu.Lock()
	g := h.txnMu.gates[pid]
	h.txnMu.Unlock()
	if g == nil {
		return nil
	}
	select {
	case <-g.zero:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// skipMarker are the commit errors for which a marker is skipped: the
// partition is gone, or takes no marker of this producer (WriteMarkers).
var skipMarker = []int16{kerr.UnknownTopicOrPartition.Code, diskless.ErrDisabling.Code, diskless.ErrDisabled.Code}

// WriteMarkers writes the COMMIT (commit) or ABORT marker of producer
// (producerID, epoch)'s transaction to each partition of parts through the
// pipeline (SPEC §15: a control batch with the producer's id and epoch,
// coordinator epoch coordEpoch, the handler's clock as timestamp) and returns once
// every one is committed. Each marker carries seq, the token of the
// transaction it ends (txn.StateRecord.Seq; 0 when not known), so that
// the partition's shard refuses the transaction's batches committed after
// it, from whichever sidecar (DESIGN §Transactions, the hazard). It first
// waits until the producer has no transactional batch in flight here (the
// package's comment on transactions), so that this sidecar's batches of
// the transaction are committed rather than refused; it must be called
// only once the transaction has left Ongoing. A partition whose topic is
// DISABLING still takes its marker (SPEC §10: the topic becomes DISABLED
// only once no transaction is open in it). A partition whose topic is gone
// or DISABLED is skipped, as is one whose commit answers so (deleted
// meanwhile, or DISABLING with no transaction of the producer open there):
// such a partition would otherwise hold its transaction's completion, and
// the transactional id, forever.
// Errors: ctx's,
// ErrClosed, the pipeline's (no marker written), or
// diskless.MarkerErrors naming each partition whose commit refused its
// marker, the others' written (the caller retries the whole transaction's
// markers: a marker written twice changes nothing; WriteTxnMarkers
// answers each partition its own error).
func (h *Handler) WriteMarkers(ctx context.Context, producerID int64, epoch int16, seq int64, coordEpoch int32, commit bool, parts []diskless.TopicPartition) error {
	if err := h.waitTxnProduces(ctx, producerID); err != nil {
		return err
	}
	kind := diskless.TxnAbort
	if commit {
		kind = diskless.TxnCommit
	}
	now := h.cfg.Now().UnixMilli()
	var (
		entries []pendingEntry
		buf     []byte
		ends    []int
	)
	for _, tp := range parts {
		t, ok := h.catalog.TopicByID(tp.TopicID)
		if !ok || tp.Partition < 0 || tp.Partition >= t.Partitions {
			continue
		}
		if t.Disablement.State == diskless.TopicDisabled {
			continue
		}
		buf = batch.AppendMarker(buf, producerID, epoch, commit, coordEpoch, now)
		ends = append(ends, len(buf))
		tsType := batch.TimestampCreateTime
		if t.Config.LogAppendTime {
			tsType = batch.TimestampLogAppendTime
		}
		entries = append(entries, pendingEntry{commit: diskless.CommitBatch{TopicID: tp.TopicID, Partition: tp.Partition, TimestampType: tsType}})
	}
	if len(entries) == 0 {
		return nil
	}
	start := 0
	for i := range entries {
		hdr := batch.Header(buf[start:ends[i]:ends[i]])
		e := newPendingEntry(entries[i].commit.TopicID, entries[i].commit.Partition, hdr, entries[i].commit.TimestampType)
		e.commit.Txn, e.commit.TxnSeq, e.commit.CoordinatorEpoch = kind, seq, coordEpoch
		entries[i] = e
		start = ends[i]
	}
	need := min(int64(len(buf)), h.cfg.MaxPendingBytes)
	if err := h.memory.Acquire(ctx, need); err != nil {
		return err
	}
	f, first, err := h.append(entries, len(buf), need, trace.SpanContext{})
	if err != nil {
		h.memory.Release(need)
		return err
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	var refused diskless.MarkerErrors
	for i := range entries {
		res := &f.results[first+i]
		if res.Err != nil && !slices.Contains(skipMarker, res.Err.Code) {
			if refused == nil {
				refused = make(diskless.MarkerErrors)
			}
			refused[diskless.TopicPartition{TopicID: entries[i].commit.TopicID, Partition: entries[i].commit.Partition}] = res.Err
		}
	}
	if refused != nil {
		return fmt.Errorf("produce: %w", refused)
	}
	return nil
}
