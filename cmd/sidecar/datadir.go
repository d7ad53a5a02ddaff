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
	"syscall"

	"github.com/magiconair/properties"

	"github.com/diskless-sidecar/sidecar/internal/fsutil"
)

// dataDir is the sidecar's data.dir, locked for the life of the process so
// that two sidecars never share one coordinator log.
//
//	data.dir/
//	  .lock             flock(2)ed while the sidecar runs
//	  meta.properties   cluster.id and node.id, written at first start
//	  coordinator/      one metadata log per coordinator shard
//	  objects/          WAL objects (local-directory object store)
type dataDir struct {
	path      string
	lock      *os.File
	clusterID string
}

// openDataDir creates data.dir if needed, takes its lock and reads or
// writes meta.properties. A node.id different from the one recorded there
// is refused: the directory belongs to another node.
func openDataDir(path string, nodeID int32) (*dataDir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, &ConfigError{Key: "data.dir", Value: path, Err: err}
	}
	lock, err := os.OpenFile(filepath.Join(path, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, &ConfigError{Key: "data.dir", Value: path, Err: err}
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, &ConfigError{Key: "data.dir", Value: path,
			Err: fmt.Errorf("locked by another process (is another sidecar running on it?): %w", err)}
	}
	d := &dataDir{path: path, lock: lock}
	if err := d.loadMeta(nodeID); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *dataDir) loadMeta(nodeID int32) error {
	metaPath := filepath.Join(d.path, "meta.properties")
	if _, err := os.Stat(metaPath); errors.Is(err, fs.ErrNotExist) {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return err
		}
		d.clusterID = base64.RawURLEncoding.EncodeToString(id[:])
		body := fmt.Sprintf("# written by the diskless sidecar at first start; do not edit\ncluster.id=%s\nnode.id=%d\nversion=1\n", d.clusterID, nodeID)
		return fsutil.WriteFile(metaPath, []byte(body), 0o644)
	}
	p, err := properties.LoadFile(metaPath, properties.UTF8)
	if err != nil {
		return fmt.Errorf("reading %s: %w", metaPath, err)
	}
	d.clusterID = p.GetString("cluster.id", "")
	recorded, err := strconv.ParseInt(p.GetString("node.id", ""), 10, 32)
	if d.clusterID == "" || err != nil {
		return fmt.Errorf("%s is damaged: it needs cluster.id and node.id", metaPath)
	}
	if int32(recorded) != nodeID {
		return &ConfigError{Key: "node.id", Value: strconv.Itoa(int(nodeID)),
			Err: fmt.Errorf("data.dir %s belongs to node.id %d", d.path, recorded)}
	}
	return nil
}

func (d *dataDir) close() {
	d.lock.Close() // closing the descriptor releases the flock
}
