package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/segment"
	"github.com/diskless-sidecar/sidecar/wal"
)

// walBatch is one record batch of a WAL object as `sidecar wal dump`
// reports it (docs/format/wal-object.md; the header fields of SPEC §1).
type walBatch struct {
	ByteOffset      int    `json:"byte_offset"`
	ByteSize        int    `json:"byte_size"`
	BaseOffset      int64  `json:"base_offset"`
	LastOffsetDelta int32  `json:"last_offset_delta"`
	Records         int32  `json:"records"`
	Magic           int8   `json:"magic"`
	Codec           string `json:"codec"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	BaseSequence    int32  `json:"base_sequence"`
	BaseTimestamp   int64  `json:"base_timestamp"`
	MaxTimestamp    int64  `json:"max_timestamp"`
	CRC             uint32 `json:"crc"`
	CRCOK           bool   `json:"crc_ok"`
}

// walDump is the whole report of one object.
type walDump struct {
	Object  string     `json:"object"`
	Size    int        `json:"size"`
	Batches []walBatch `json:"batches"`
	Records int64      `json:"records"`
	BadCRCs int        `json:"bad_crcs"`
	// Error is a framing error that stopped the walk (the batches before
	// it are listed), or a segment object's index or trailer that does not
	// check out; empty when the object walked to its end.
	Error string `json:"error,omitempty"`
	// Segment is a segment object's trailer and index
	// (docs/format/segment-object.md); nil for a WAL object. Its batches
	// are those of its data, before the index.
	Segment *segmentDump `json:"segment,omitempty"`
}

// segmentDump is a segment object's trailer and index entries.
type segmentDump struct {
	TopicID       string         `json:"topic_id"`
	Partition     int32          `json:"partition"`
	BaseOffset    int64          `json:"base_offset"`
	DataSize      int64          `json:"data_size"`
	IndexInterval uint32         `json:"index_interval"`
	Entries       []segmentEntry `json:"entries"`
}

// segmentEntry is one index entry, its offsets absolute.
type segmentEntry struct {
	FirstOffset   int64 `json:"first_offset"`
	LastOffset    int64 `json:"last_offset"`
	ByteOffset    int64 `json:"byte_offset"`
	ByteSize      int64 `json:"byte_size"`
	MaxTimestamp  int64 `json:"max_timestamp"`
	AppendTime    int64 `json:"append_time"`
	TimestampType int8  `json:"timestamp_type"`
}

var codecNames = map[int8]string{0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

// dumpWAL walks object (wal.Walk) and checks each batch's CRC-32C; of a
// segment object (segment.Is: it ends with a segment trailer) it decodes
// the index and walks the data before it.
func dumpWAL(name string, object []byte) walDump {
	d := walDump{Object: name, Size: len(object), Batches: []walBatch{}}
	data := object
	if segment.Is(object) {
		size := int64(len(object))
		tr, _ := segment.DecodeTrailer(object[size-segment.TrailerSize:], size)
		d.Segment = &segmentDump{TopicID: diskless.TopicID(tr.TopicID).String(), Partition: tr.Partition, BaseOffset: tr.BaseOffset,
			DataSize: tr.DataSize, IndexInterval: tr.IndexInterval, Entries: []segmentEntry{}}
		data = object[:tr.DataSize]
		_, es, err := segment.DecodeIndex(object[tr.DataSize:], tr.DataSize, size)
		if err != nil {
			d.Error = err.Error()
		}
		for _, e := range es {
			first := tr.BaseOffset + int64(e.OffsetDelta)
			d.Segment.Entries = append(d.Segment.Entries, segmentEntry{FirstOffset: first, LastOffset: first + int64(e.LastOffsetDelta),
				ByteOffset: int64(e.Position), ByteSize: int64(e.Size), MaxTimestamp: e.MaxTimestamp, AppendTime: e.AppendTime,
				TimestampType: e.TimestampType})
		}
	}
	err := wal.Walk(data, func(off int, h batch.Header) error {
		codec, ok := codecNames[h.Codec()]
		if !ok {
			codec = fmt.Sprintf("unknown(%d)", h.Codec())
		}
		b := walBatch{
			ByteOffset: off, ByteSize: int(h.BatchLength()) + 12, BaseOffset: h.BaseOffset(),
			LastOffsetDelta: h.LastOffsetDelta(), Records: h.RecordsCount(), Magic: h.Magic(), Codec: codec,
			ProducerID: h.ProducerID(), ProducerEpoch: h.ProducerEpoch(), BaseSequence: h.BaseSequence(),
			BaseTimestamp: h.BaseTimestamp(), MaxTimestamp: h.MaxTimestamp(), CRC: h.CRC(),
			CRCOK: h.ComputeCRC() == h.CRC(),
		}
		if !b.CRCOK {
			d.BadCRCs++
		}
		d.Records += int64(b.Records)
		d.Batches = append(d.Batches, b)
		return nil
	})
	if err != nil && d.Error == "" {
		d.Error = err.Error()
	}
	return d
}

// runWAL is `sidecar wal dump [--json] [--config FILE] [--set k=v]... OBJECT`:
// OBJECT is a file, or else an object key read from the configured store
// (the file backend's data.dir/objects, or S3). Exit codes: 0 the object
// walked to its end with every CRC right, 1 a bad CRC, a framing error or
// a read failure, 2 bad arguments.
func runWAL(args []string, stdout io.Writer, stderr *os.File) int {
	if len(args) == 0 || args[0] != "dump" {
		fmt.Fprintln(stderr, "usage: sidecar wal dump [--json] [--config FILE] [--set key=value]... <object key|file>")
		return 2
	}
	fs := flag.NewFlagSet("wal dump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	configPath := fs.String("config", "", "properties file naming the object store (for an object key)")
	var sets stringList
	fs.Var(&sets, "set", "override one config key, key=value (repeatable)")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 {
		if err == nil {
			fmt.Fprintln(stderr, "sidecar wal dump: want one object key or file")
		}
		return 2
	}
	name := fs.Arg(0)
	object, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		object, err = readObject(name, *configPath, sets)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sidecar wal dump: %v\n", err)
		return 1
	}
	d := dumpWAL(name, object)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil {
			return 1
		}
	} else {
		printWAL(stdout, d)
	}
	if d.BadCRCs > 0 || d.Error != "" {
		return 1
	}
	return 0
}

// readObject reads a whole object by key from the store the config names.
func readObject(key, configPath string, sets []string) ([]byte, error) {
	cfg, err := LoadConfig(configPath, append(EnvSets(os.Environ()), sets...))
	if err != nil {
		return nil, err
	}
	store, closeStore, err := openInspectedStore(cfg)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	ctx := context.Background()
	_, size, err := store.ReadRange(ctx, key, 0, nil)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", key, err)
	}
	buf := make([]byte, size)
	if _, _, err := store.ReadRange(ctx, key, 0, buf); err != nil {
		return nil, fmt.Errorf("object %s: %w", key, err)
	}
	return buf, nil
}

func printWAL(w io.Writer, d walDump) {
	fmt.Fprintf(w, "object %s: %d bytes, %d batches, %d records, %d bad CRCs\n", d.Object, d.Size, len(d.Batches), d.Records, d.BadCRCs)
	if sg := d.Segment; sg != nil {
		fmt.Fprintf(w, "segment object: topic id %s partition %d, offsets from %d, %d bytes of data, %d index entries (every %d bytes)\n",
			sg.TopicID, sg.Partition, sg.BaseOffset, sg.DataSize, len(sg.Entries), sg.IndexInterval)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "first offset\tlast offset\tbyte offset\tsize\tmax timestamp\tappend time\ttimestamp type\t")
		for _, e := range sg.Entries {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", e.FirstOffset, e.LastOffset, e.ByteOffset, e.ByteSize,
				e.MaxTimestamp, e.AppendTime, e.TimestampType)
		}
		tw.Flush()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "byte offset\tsize\trecords\tcodec\tproducer id\tepoch\tbase seq\tmax timestamp\tcrc\t")
	for _, b := range d.Batches {
		crc := "ok"
		if !b.CRCOK {
			crc = "BAD"
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%s\t\n", b.ByteOffset, b.ByteSize, b.Records, b.Codec,
			b.ProducerID, b.ProducerEpoch, b.BaseSequence, b.MaxTimestamp, crc)
	}
	tw.Flush()
	if d.Error != "" {
		fmt.Fprintf(w, "stopped: %s\n", strings.TrimPrefix(d.Error, "wal: "))
	}
}

// storeObject is one object as `sidecar object-store ls` reports it.
type storeObject struct {
	Key          string    `json:"key"`
	Size         int64     `json:"size"`
	LastModified time.Time `json:"last_modified"`
}

// runObjectStore is `sidecar object-store ls [--json] [--prefix P]
// [--config FILE] [--set k=v]...`: every object of the configured store
// (the file backend's data.dir/objects, or the S3 bucket under its
// prefix) whose key starts with P, in key order, then the count and bytes.
// Exit codes: 0 listed, 1 the store failed, 2 bad arguments.
func runObjectStore(args []string, stdout io.Writer, stderr *os.File) int {
	if len(args) > 0 && args[0] == "orphans" {
		return runOrphans(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "ls" {
		fmt.Fprintln(stderr, "usage: sidecar object-store ls [--json] [--prefix P] [--config FILE] [--set key=value]...\n"+
			"       sidecar object-store orphans [--json] [--delete [--dry-run]] [--config FILE] [--set key=value]...")
		return 2
	}
	fs := flag.NewFlagSet("object-store ls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the objects as JSON")
	prefix := fs.String("prefix", "", "list only keys starting with this")
	configPath := fs.String("config", "", "properties file naming the object store")
	var sets stringList
	fs.Var(&sets, "set", "override one config key, key=value (repeatable)")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 0 {
		return 2
	}
	cfg, err := LoadConfig(*configPath, append(EnvSets(os.Environ()), sets...))
	if err != nil {
		fmt.Fprintf(stderr, "sidecar object-store ls: %v\n", err)
		return 2
	}
	store, closeStore, err := openInspectedStore(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "sidecar object-store ls: %v\n", err)
		return 1
	}
	defer closeStore()
	objs := []storeObject{}
	var total int64
	err = store.List(context.Background(), *prefix, func(o objstore.ObjectInfo) error {
		objs = append(objs, storeObject{Key: o.Key, Size: o.Size, LastModified: o.LastModified.UTC()})
		total += o.Size
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "sidecar object-store ls: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if enc.Encode(struct {
			Objects []storeObject `json:"objects"`
			Count   int           `json:"count"`
			Bytes   int64         `json:"bytes"`
		}{objs, len(objs), total}) != nil {
			return 1
		}
		return 0
	}
	for _, o := range objs {
		fmt.Fprintf(stdout, "%12d  %s  %s\n", o.Size, o.LastModified.Format(time.RFC3339), o.Key)
	}
	fmt.Fprintf(stdout, "%d objects, %d bytes\n", len(objs), total)
	return 0
}

// openInspectedStore opens the configured store for the inspection
// commands, without metrics or logs. The file backend's directory must
// exist: an inspection never creates one.
func openInspectedStore(cfg Config) (objstore.Store, func(), error) {
	if cfg.StorageBackend != "s3" {
		dir := filepath.Join(cfg.DataDir, "objects")
		if _, err := os.Stat(dir); err != nil {
			return nil, nil, fmt.Errorf("the file store of data.dir %s: %w", cfg.DataDir, err)
		}
	}
	return openStore(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
}
