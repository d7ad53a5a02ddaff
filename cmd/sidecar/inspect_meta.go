package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/txn"
	"github.com/magiconair/properties"
)

// metaRecord is one record of a shard's metadata log as `sidecar meta dump`
// prints it (docs/format/metadata-records.md).
type metaRecord struct {
	Index  int64  `json:"index"`
	Type   string `json:"type"`
	Record any    `json:"record,omitempty"`
	Error  string `json:"error,omitempty"` // the record did not decode
}

// metaPartition is what the records after the snapshot say of one
// partition: batches and records committed, and the offsets they end at.
type metaPartition struct {
	Topic          string `json:"topic"`
	TopicID        string `json:"topic_id"`
	Partition      int32  `json:"partition"`
	Batches        int64  `json:"batches"`
	Records        int64  `json:"records"`
	NextOffset     int64  `json:"next_offset"`      // last assigned offset + 1; 0 with no batch after the snapshot
	LogStartOffset int64  `json:"log_start_offset"` // from the last RecordsDeleted, else 0
	// Segments counts the segment objects consolidation swapped in for
	// the partition's WAL runs (records 114).
	Segments int64 `json:"segments"`
}

// metaShard is the report of one shard.
type metaShard struct {
	Dir string `json:"dir"`
	// SnapshotIndex is the index the snapshot covers records up to (0:
	// none); SnapshotBytes its size. The records before it are not in the
	// log, so the summary below covers only the records after it.
	SnapshotIndex int64           `json:"snapshot_index"`
	SnapshotBytes int             `json:"snapshot_bytes"`
	NextIndex     int64           `json:"next_index"` // what replay returns: the index of the next record
	Counts        map[string]int  `json:"counts"`     // records by type
	Partitions    []metaPartition `json:"partitions"`
	LiveObjects   []string        `json:"live_objects"` // committed and not deleted, after the snapshot
	Repairs       []string        `json:"repairs"`      // what opening the log would repair (torn tail, …)
	Errors        []string        `json:"errors"`       // records that did not decode, replay errors
	Records       []metaRecord    `json:"records,omitempty"`
	topicNames    map[string]string
	parts         map[string]*metaPartition
	objects       map[string]bool
}

// runMeta is `sidecar meta dump|verify [--json] [--records=false] <data.dir
// or shard dir>`. It never touches the log: each shard's directory is
// copied to a temporary one, which the metadata log opens and replays
// (repairs, if any, happen to the copy and are reported). verify prints
// the same report and exits 1 when a repair would be needed or a record
// does not decode. Exit codes: 0, 1 (found damage or could not read), 2
// (bad arguments).
func runMeta(args []string, stdout io.Writer, stderr *os.File) int {
	if len(args) == 0 || (args[0] != "dump" && args[0] != "verify") {
		fmt.Fprintln(stderr, "usage: sidecar meta dump|verify [--json] [--records=false] <data.dir|shard dir>")
		return 2
	}
	verb := args[0]
	fs := flag.NewFlagSet("meta "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	withRecords := fs.Bool("records", verb == "dump", "list every record")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 {
		return 2
	}
	shards, err := shardDirs(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "sidecar meta %s: %v\n", verb, err)
		return 1
	}
	var reports []*metaShard
	bad := false
	for _, dir := range shards {
		r, err := inspectShard(dir, *withRecords)
		if err != nil {
			fmt.Fprintf(stderr, "sidecar meta %s: %s: %v\n", verb, dir, err)
			return 1
		}
		bad = bad || len(r.Repairs) > 0 || len(r.Errors) > 0
		reports = append(reports, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if enc.Encode(map[string]any{"shards": reports}) != nil {
			return 1
		}
	} else {
		for _, r := range reports {
			printShard(stdout, r)
		}
	}
	if bad && verb == "verify" {
		return 1
	}
	return 0
}

// shardDirs returns the shard directories of a data.dir
// (coordinator/shard-N), or path itself when it is one.
func shardDirs(path string) ([]string, error) {
	if strings.HasPrefix(filepath.Base(filepath.Clean(path)), "shard-") {
		if _, err := os.Stat(path); err != nil {
			return nil, err
		}
		return []string{path}, nil
	}
	dirs, err := filepath.Glob(filepath.Join(path, "coordinator", "shard-*"))
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no coordinator/shard-* under %s (a data.dir whose metadata log is on Kafka has none)", path)
	}
	sort.Strings(dirs)
	return dirs, nil
}

func inspectShard(dir string, withRecords bool) (*metaShard, error) {
	tmp, err := os.MkdirTemp("", "sidecar-meta-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cp := filepath.Join(tmp, "shard")
	if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
		return nil, fmt.Errorf("copying the shard: %w", err)
	}
	var warnings bytes.Buffer
	l, err := metalog.OpenFileLog(cp, slog.New(slog.NewTextHandler(&warnings, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return nil, err
	}
	defer l.Close()
	r := &metaShard{Dir: dir, Counts: map[string]int{}, Partitions: []metaPartition{}, LiveObjects: []string{},
		Repairs: []string{}, Errors: []string{},
		topicNames: map[string]string{}, parts: map[string]*metaPartition{}, objects: map[string]bool{}}
	ctx := context.Background()
	idx, snap, err := l.ReadSnapshot(ctx)
	if err != nil {
		r.Errors = append(r.Errors, "snapshot: "+err.Error())
	}
	r.SnapshotIndex, r.SnapshotBytes = idx, len(snap)
	next, err := l.Replay(ctx, idx, func(i int64, body []byte) error {
		rec, typ, err := decodeMetaRecord(body)
		mr := metaRecord{Index: i}
		if err != nil {
			mr.Type, mr.Error = "undecodable", err.Error()
			r.Errors = append(r.Errors, fmt.Sprintf("record %d: %v", i, err))
		} else {
			mr.Type, mr.Record = typ, rec
			if pr, ok := rec.(records.Record); ok {
				r.apply(pr)
			}
		}
		r.Counts[mr.Type]++
		if withRecords {
			r.Records = append(r.Records, mr)
		}
		return nil
	})
	if err != nil {
		r.Errors = append(r.Errors, "replay: "+err.Error())
	}
	r.NextIndex = next
	for _, l := range strings.Split(strings.TrimSpace(warnings.String()), "\n") {
		if l != "" {
			r.Repairs = append(r.Repairs, strings.ReplaceAll(l, cp, dir))
		}
	}
	for _, p := range r.parts {
		if n, ok := r.topicNames[p.TopicID]; ok {
			p.Topic = n
		}
		r.Partitions = append(r.Partitions, *p)
	}
	slices.SortFunc(r.Partitions, func(a, b metaPartition) int {
		if c := strings.Compare(a.Topic+a.TopicID, b.Topic+b.TopicID); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	for k := range r.objects {
		r.LiveObjects = append(r.LiveObjects, k)
	}
	sort.Strings(r.LiveObjects)
	return r, nil
}

// decodeMetaRecord decodes a record body, the partition coordinator's
// (package records), the consumer groups' (107 … 110 and 113, package
// group) or the transaction coordinator's (118, package txn), and names
// its type.
func decodeMetaRecord(body []byte) (any, string, error) {
	kr := kbin.Reader{Src: body}
	kr.Uvarint()
	key := kr.Uvarint()
	if kr.Ok() && key <= math.MaxInt16 && group.IsRecordKey(int16(key)) {
		rec, err := group.DecodeRecord(body)
		return rec, strings.TrimPrefix(fmt.Sprintf("%T", rec), "*group."), err
	}
	if kr.Ok() && key <= math.MaxInt16 && txn.IsRecordKey(int16(key)) {
		rec, err := txn.DecodeRecord(body)
		return rec, "TxnStateRecord", err
	}
	rec, err := records.Decode(body)
	return rec, strings.TrimPrefix(fmt.Sprintf("%T", rec), "*records."), err
}

func (r *metaShard) part(id string, p int32) *metaPartition {
	k := fmt.Sprintf("%s/%d", id, p)
	mp := r.parts[k]
	if mp == nil {
		mp = &metaPartition{TopicID: id, Partition: p}
		r.parts[k] = mp
	}
	return mp
}

// apply folds one record into the summary.
func (r *metaShard) apply(rec records.Record) {
	switch v := rec.(type) {
	case *records.PartitionCreated:
		r.topicNames[v.TopicID.String()] = v.TopicName
		r.part(v.TopicID.String(), v.Partition)
	case *records.TopicConfig:
		r.topicNames[v.TopicID.String()] = v.TopicName
	case *records.FileCommitted:
		r.objects[v.ObjectKey] = true
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				mp := r.part(t.TopicID.String(), p.Partition)
				for _, b := range p.Batches {
					mp.Batches++
					mp.Records += b.AssignedLastOffset - b.AssignedBaseOffset + 1
					mp.NextOffset = max(mp.NextOffset, b.AssignedLastOffset+1)
				}
			}
		}
	case *records.SegmentCommitted:
		r.objects[v.ObjectKey] = true
		r.part(v.TopicID.String(), v.Partition).Segments++
	case *records.FileDeleted:
		delete(r.objects, v.ObjectKey)
	case *records.RecordsDeleted:
		r.part(v.TopicID.String(), v.Partition).LogStartOffset = v.NewLogStartOffset
	}
}

func printShard(w io.Writer, r *metaShard) {
	fmt.Fprintf(w, "shard %s: snapshot at index %d (%d bytes), next index %d\n", r.Dir, r.SnapshotIndex, r.SnapshotBytes, r.NextIndex)
	types := make([]string, 0, len(r.Counts))
	for t := range r.Counts {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		fmt.Fprintf(w, "  %-18s %d\n", t, r.Counts[t])
	}
	for _, p := range r.Partitions {
		fmt.Fprintf(w, "  partition %s-%d (%s): %d batches, %d records, %d segments, next offset %d, log start %d\n",
			p.Topic, p.Partition, p.TopicID, p.Batches, p.Records, p.Segments, p.NextOffset, p.LogStartOffset)
	}
	fmt.Fprintf(w, "  live objects: %d\n", len(r.LiveObjects))
	for _, rec := range r.Records {
		b, _ := json.Marshal(rec.Record)
		if rec.Error != "" {
			b = []byte(rec.Error)
		}
		fmt.Fprintf(w, "  %6d %-16s %s\n", rec.Index, rec.Type, b)
	}
	for _, s := range r.Repairs {
		fmt.Fprintf(w, "  REPAIR: %s\n", s)
	}
	for _, s := range r.Errors {
		fmt.Fprintf(w, "  ERROR: %s\n", s)
	}
}

// orphanObject is an object of this data.dir's key space that no shard's
// metadata log holds.
type orphanObject struct {
	Key          string    `json:"key"`
	Size         int64     `json:"size"`
	LastModified time.Time `json:"last_modified"`
	Deleted      bool      `json:"deleted"`
}

// runOrphans is `sidecar object-store orphans [--json] [--delete]
// [--dry-run] [--config FILE] [--set k=v]...`: the objects under
// <diskless.object.key.prefix>/<cluster.id>/ (the cluster id of data.dir's
// meta.properties, so another data.dir's objects in a shared bucket are
// never looked at) older than diskless.coordinator.orphan.scan.grace.period.ms
// that no shard's metadata log holds (committed and not deleted, from
// runMeta's replay of a copy). --delete deletes them; with --dry-run it
// only says what it would delete. It refuses when a shard has a snapshot
// (the objects it holds are not in the records after it) or the metadata
// log is not the embedded one, and when any shard needs a repair or has an
// undecodable record. Exit codes: 0, 1 (refused or failed), 2 (bad
// arguments).
func runOrphans(args []string, stdout io.Writer, stderr *os.File) int {
	fs := flag.NewFlagSet("object-store orphans", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the orphans as JSON")
	del := fs.Bool("delete", false, "delete the orphans found")
	dryRun := fs.Bool("dry-run", false, "with --delete: list what would be deleted, delete nothing")
	configPath := fs.String("config", "", "properties file of the sidecar (data.dir, object store)")
	var sets stringList
	fs.Var(&sets, "set", "override one config key, key=value (repeatable)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sidecar object-store orphans: "+format+"\n", a...)
		return 1
	}
	cfg, err := LoadConfig(*configPath, append(EnvSets(os.Environ()), sets...))
	if err != nil {
		fmt.Fprintf(stderr, "sidecar object-store orphans: %v\n", err)
		return 2
	}
	meta, err := properties.LoadFile(filepath.Join(cfg.DataDir, "meta.properties"), properties.UTF8)
	if err != nil {
		return fail("data.dir %s: %v", cfg.DataDir, err)
	}
	clusterID := meta.GetString("cluster.id", "")
	if clusterID == "" {
		return fail("data.dir %s: meta.properties has no cluster.id", cfg.DataDir)
	}
	if l := meta.GetString("metadata.log", "embedded"); l != "embedded" {
		return fail("data.dir %s keeps its coordinator state in %s, not in the embedded log: its objects cannot be told apart here", cfg.DataDir, l)
	}
	shards, err := shardDirs(cfg.DataDir)
	if err != nil {
		return fail("%v", err)
	}
	live := map[string]bool{}
	for _, dir := range shards {
		r, err := inspectShard(dir, false)
		if err != nil {
			return fail("%s: %v", dir, err)
		}
		switch {
		case r.SnapshotIndex > 0:
			return fail("%s has a snapshot (index %d): the objects it holds are not listed in its records; refusing", dir, r.SnapshotIndex)
		case len(r.Repairs) > 0 || len(r.Errors) > 0:
			return fail("%s needs a repair or has bad records (sidecar meta verify); refusing", dir)
		}
		for _, k := range r.LiveObjects {
			live[k] = true
		}
	}
	store, closeStore, err := openInspectedStore(cfg)
	if err != nil {
		return fail("%v", err)
	}
	defer closeStore()
	ctx := context.Background()
	cutoff := time.Now().Add(-cfg.OrphanScanGracePeriod)
	orphans := []orphanObject{}
	prefix := cfg.ObjectKeyPrefix + "/" + clusterID + "/"
	err = store.List(ctx, prefix, func(o objstore.ObjectInfo) error {
		if !live[o.Key] && o.LastModified.Before(cutoff) {
			orphans = append(orphans, orphanObject{Key: o.Key, Size: o.Size, LastModified: o.LastModified.UTC()})
		}
		return nil
	})
	if err != nil {
		return fail("listing %s: %v", prefix, err)
	}
	code := 0
	if *del && !*dryRun {
		for i := range orphans {
			if err := store.Delete(ctx, orphans[i].Key); err != nil {
				fmt.Fprintf(stderr, "sidecar object-store orphans: deleting %s: %v\n", orphans[i].Key, err)
				code = 1
				continue
			}
			orphans[i].Deleted = true
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if enc.Encode(map[string]any{"prefix": prefix, "live": len(live), "orphans": orphans}) != nil {
			return 1
		}
		return code
	}
	verb := "orphan"
	switch {
	case *del && *dryRun:
		verb = "would delete"
	case *del:
		verb = "deleted"
	}
	for _, o := range orphans {
		if !*del || *dryRun || o.Deleted {
			fmt.Fprintf(stdout, "%s %12d  %s  %s\n", verb, o.Size, o.LastModified.Format(time.RFC3339), o.Key)
		}
	}
	fmt.Fprintf(stdout, "%d orphans under %s (%d objects held by the metadata log)\n", len(orphans), prefix, len(live))
	return code
}
