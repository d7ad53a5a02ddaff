package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/magiconair/properties"

	"github.com/diskless-sidecar/sidecar/internal/dirlock"
	"github.com/diskless-sidecar/sidecar/internal/fsutil"
)

// dataDir is the sidecar's data.dir, locked for the life of the process so
// that two sidecars never share one coordinator log: the one lock of the
// directory (the coordinator's metadata logs under it take none of their
// own).
//
//	data.dir/
//	  .lock             locked (internal/dirlock) while the sidecar runs
//	  meta.properties   what the directory is bound to (see bindings)
//	  coordinator/      one metadata log per coordinator shard
//	  objects/          WAL objects (local-directory object store)
type dataDir struct {
	path      string
	lock      *dirlock.Lock
	clusterID string
	// props is meta.properties as it is to be; dirty when saveMeta must
	// write it (first start, or a binding recorded for the first time),
	// fresh when the directory had none.
	props        *properties.Properties
	dirty, fresh bool
}

// binding is a setting recorded in meta.properties at first start that the
// directory's content depends on: a later start with another value would
// find its metadata unusable (another node's, shards hashed differently,
// objects in another store), so it is refused, naming the config key.
type binding struct {
	name  string // in meta.properties
	key   string // the config key that sets it
	value string
	why   string
	// legacy, if set, is the value a directory from before the binding
	// was recorded has (instead of recording the current value).
	legacy string
}

// bindings returns what a data.dir is bound to under cfg.
func bindings(cfg Config) []binding {
	store := "file"
	if cfg.StorageBackend == "s3" {
		store = "s3://" + cfg.S3Bucket + "/" + cfg.S3Prefix
	}
	storeKey := "diskless.storage.backend"
	if cfg.StorageBackend == "s3" {
		storeKey = "diskless.storage.s3.bucket"
	}
	return []binding{
		{"node.id", "node.id", strconv.Itoa(int(cfg.NodeID)), "it belongs to another node", ""},
		{"coordinator.shards", "diskless.metadata.topic.num.partitions", strconv.Itoa(int(cfg.MetadataShards)),
			"its partitions are assigned to shards by a hash of the shard count", ""},
		{"object.store", storeKey, store,
			"its coordinator logs reference objects in that store (use another data.dir for another store)", ""},
		{"metadata.log", "diskless.metadata.log", metadataLogBinding(cfg),
			"its coordinator state is in that metadata log (use another data.dir for another one)", "embedded"},
	}
}

// metadataLogBinding is where a data.dir's coordinator state lives:
// embedded, or kafka:<diskless.metadata.topic>.
func metadataLogBinding(cfg Config) string {
	if cfg.MetadataLog == "kafka" {
		return "kafka:" + cfg.MetadataTopic
	}
	return "embedded"
}

// openDataDir creates data.dir if needed, takes its lock and reads or
// writes meta.properties: the cluster id, and the settings the directory is
// bound to (bindings), each refused if it differs from the recorded one.
func openDataDir(path string, cfg Config) (*dataDir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, &ConfigError{Key: "data.dir", Value: path, Err: err}
	}
	lock, err := dirlock.TryAcquire(filepath.Join(path, ".lock"))
	if errors.Is(err, dirlock.ErrLocked) {
		return nil, &ConfigError{Key: "data.dir", Value: path,
			Err: fmt.Errorf("%w (is another sidecar running on it?)", dirlock.ErrLocked)}
	}
	if err != nil {
		return nil, &ConfigError{Key: "data.dir", Value: path, Err: err}
	}
	d := &dataDir{path: path, lock: lock}
	if err := d.loadMeta(bindings(cfg)); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *dataDir) loadMeta(bs []binding) error {
	metaPath := filepath.Join(d.path, "meta.properties")
	p := properties.NewProperties()
	if _, err := os.Stat(metaPath); errors.Is(err, fs.ErrNotExist) {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return err
		}
		p.MustSet("cluster.id", base64.RawURLEncoding.EncodeToString(id[:]))
		p.MustSet("version", "1")
		d.dirty, d.fresh = true, true
	} else if p, err = properties.LoadFile(metaPath, properties.UTF8); err != nil {
		return fmt.Errorf("reading %s: %w", metaPath, err)
	}
	d.props = p
	d.clusterID = p.GetString("cluster.id", "")
	if d.clusterID == "" {
		return fmt.Errorf("%s is damaged: it has no cluster.id", metaPath)
	}
	for _, b := range bs {
		recorded, ok := p.Get(b.name)
		switch {
		case !ok && (d.fresh || b.legacy == ""):
			// First start, or a directory from before this binding was
			// recorded: record the current value.
			p.MustSet(b.name, b.value)
			d.dirty = true
		case !ok && b.legacy != b.value:
			return &ConfigError{Key: b.key, Value: b.value,
				Err: fmt.Errorf("data.dir %s was created with %s=%s and cannot change: %s", d.path, b.name, b.legacy, b.why)}
		case !ok:
			p.MustSet(b.name, b.value)
			d.dirty = true
		case recorded != b.value:
			return &ConfigError{Key: b.key, Value: b.value,
				Err: fmt.Errorf("data.dir %s was created with %s=%s and cannot change: %s", d.path, b.name, recorded, b.why)}
		}
	}
	return nil
}

// useClusterID makes id the directory's cluster id: the Kafka cluster's
// with diskless.metadata.log=kafka, so that every sidecar sharing the
// metadata topic reports and uses the same one. A new directory takes it;
// one created for another Kafka cluster is refused, naming key.
func (d *dataDir) useClusterID(id, key, value string) error {
	if id == d.clusterID {
		return nil
	}
	if !d.fresh {
		return &ConfigError{Key: key, Value: value,
			Err: fmt.Errorf("data.dir %s belongs to cluster.id %s, not to this Kafka cluster's %s (use another data.dir)", d.path, d.clusterID, id)}
	}
	d.props.MustSet("cluster.id", id)
	d.clusterID = id
	return nil
}

// saveMeta writes meta.properties if loadMeta changed it. start calls it
// once the object store answered and the coordinator opened, so that a
// start that fails before then (a mistyped bucket, bad credentials, a port
// in use) binds the directory to nothing and can be retried with fixed
// values.
func (d *dataDir) saveMeta() error {
	if !d.dirty {
		return nil
	}
	meta := []byte("# written by the diskless sidecar; do not edit: data.dir is bound to these values\n" + d.props.String())
	if err := fsutil.WriteFile(filepath.Join(d.path, "meta.properties"), meta, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(d.path, "meta.properties"), err)
	}
	d.dirty, d.fresh = false, false
	return nil
}

func (d *dataDir) close() {
	d.lock.Release()
}
