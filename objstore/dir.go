package objstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/diskless-sidecar/sidecar/internal/fsutil"
)

// StagingDirName is the directory under a Dir's root where Put writes
// objects before renaming them into place. It is not part of the key space:
// List skips it and keys whose first segment is StagingDirName are invalid
// for a Dir.
const StagingDirName = ".staging"

const (
	dirPerm = 0o750 // object directories; objects themselves are 0o600 (os.CreateTemp)
)

// Dir is the local-directory backend, the default store (under data.dir).
// The object with key "a/b/c" is the file root/a/b/c.
//
// Durability: Put writes the object to a temporary file in
// root/StagingDirName, fsyncs it, creates missing parent directories,
// renames it into place and fsyncs every directory whose entries changed, so
// a crash at any point leaves either no object or the whole object under its
// key. Temporary files left by a crash are removed by NewDir.
//
// A Dir assumes it is the only writer of root: NewDir removes whatever is in
// the staging directory, including another process's Puts in progress.
//
// Unlike S3, a directory tree cannot hold both "a/b" and "a/b/c"; the second
// Put fails. Keys of the form <prefix>/<id> (SPEC §7) never collide this way.
// Delete leaves emptied parent directories in place: removing them would
// race with a concurrent Put creating an object beside the deleted one.
type Dir struct {
	root    string // absolute, cleaned
	staging string // root/StagingDirName
	// durable holds the directories (paths) whose entries, and their
	// ancestors' up to root, this Dir has fsynced; see ensureDir.
	durable sync.Map
}

var _ Store = (*Dir)(nil)

// NewDir opens the directory store rooted at root, creating root if needed
// and removing stale temporary files left by a crash.
func NewDir(root string) (*Dir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("objstore: open dir %s: %w", root, err)
	}
	d := &Dir{root: abs, staging: filepath.Join(abs, StagingDirName)}
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, fmt.Errorf("objstore: open dir: %w", err)
	}
	// Everything in staging is a Put that never reached its rename: garbage.
	if err := os.RemoveAll(d.staging); err != nil {
		return nil, fmt.Errorf("objstore: open dir: remove stale temporary files: %w", err)
	}
	if err := os.Mkdir(d.staging, dirPerm); err != nil {
		return nil, fmt.Errorf("objstore: open dir: %w", err)
	}
	if err := fsutil.SyncDir(abs); err != nil {
		return nil, fmt.Errorf("objstore: open dir: %w", err)
	}
	return d, nil
}

// path returns the file name of key, or an error wrapping ErrInvalidKey.
func (d *Dir) path(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	if key == StagingDirName || strings.HasPrefix(key, StagingDirName+"/") {
		return "", fmt.Errorf("%w %q: %s is reserved by the directory store", ErrInvalidKey, key, StagingDirName)
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// Put implements Store.Put; see Dir for the durability protocol.
func (d *Dir) Put(ctx context.Context, key string, data []byte) (err error) {
	name, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("objstore: put %s: %w", key, err)
		}
	}()

	f, err := os.CreateTemp(d.staging, "put-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			_ = os.Remove(tmp) // best effort: NewDir removes leftovers
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}

	dir := filepath.Dir(name)
	toSync, err := d.ensureDir(dir)
	if err != nil {
		return err
	}
	// Last chance to honour cancellation: after the rename the object exists.
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	renamed = true
	// The rename changed the parent's entries and the staging directory's;
	// the staging entry's removal need not be durable (NewDir cleans up).
	toSync = append(toSync, dir)
	for _, p := range toSync {
		if err := fsutil.SyncDir(p); err != nil {
			return err
		}
	}
	if len(toSync) > 1 {
		d.durable.Store(dir, struct{}{})
	}
	return nil
}

// ensureDir creates dir (a directory below root) and its missing parents,
// and returns the directories to fsync, after the object's rename, for the
// chain of entries from root to dir to be durable: root and every directory
// between it and dir's parent. Once they are synced, Put records dir in
// d.durable so that later Puts into it skip this. A directory that exists is not assumed
// durable, since it may have just been created by a concurrent Put that has
// not synced it yet.
func (d *Dir) ensureDir(dir string) ([]string, error) {
	if _, ok := d.durable.Load(dir); ok || dir == d.root {
		return nil, nil
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, err
	}
	var dirs []string
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		dirs = append(dirs, p)
		if p == d.root || len(p) <= len(d.root) {
			return dirs, nil
		}
	}
}

// ReadRange implements Store.ReadRange: the size is the file's.
func (d *Dir) ReadRange(ctx context.Context, key string, off int64, p []byte) (int, int64, error) {
	name, err := d.path(key)
	if err != nil {
		return 0, 0, err
	}
	if off < 0 {
		return 0, 0, fmt.Errorf("objstore: read %s: negative offset %d", key, off)
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, fmt.Errorf("objstore: read %s: %w", key, err)
	}
	f, err := os.Open(name)
	if err != nil {
		if isNotExist(err) {
			return 0, 0, fmt.Errorf("objstore: read %s: %w", key, ErrNotExist)
		}
		return 0, 0, fmt.Errorf("objstore: read %s: %w", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("objstore: read %s: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		// A directory holding other objects' keys, not an object.
		return 0, 0, fmt.Errorf("objstore: read %s: %w", key, ErrNotExist)
	}
	size := fi.Size()
	n := int(min(int64(len(p)), max(size-off, 0)))
	if n == 0 {
		return 0, size, nil
	}
	if _, err := f.ReadAt(p[:n], off); err != nil {
		if err == io.EOF {
			// Shorter than its size: objects are immutable, so the file
			// is not an object's whole (a torn write).
			err = io.ErrUnexpectedEOF
		}
		return 0, 0, fmt.Errorf("objstore: read %s [%d, %d) of %d bytes: %w", key, off, off+int64(n), size, err)
	}
	return n, size, nil
}

// Delete implements Store.Delete. A directory under key (holding other
// objects) is not an object and is left alone.
func (d *Dir) Delete(ctx context.Context, key string) error {
	name, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	fi, err := os.Lstat(name)
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	// Not fsynced: a deletion lost in a crash is redone by the orphan scan.
	if err := os.Remove(name); err != nil && !isNotExist(err) {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	return nil
}

// List implements Store.List. It walks only the directories that can hold
// keys with the prefix, and skips the staging directory, directories and
// anything that is not a regular file (symlinks are not followed).
func (d *Dir) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	errStop := errors.New("stop") // distinguishes fn's error from ours
	var fnErr error
	err := d.walk(ctx, "", prefix, func(oi ObjectInfo) error {
		if err := fn(oi); err != nil {
			fnErr = err
			return errStop
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	return nil
}

// walk visits the objects under the directory for key prefix dirKey ("" for
// root, else ending in "/") in lexical key order.
//
// Order: os.ReadDir sorts entries by name, but key order differs when a
// directory name is a prefix of a sibling: "a/x" (in directory a) sorts
// after "a.b" because '/' > '.'. Sorting directories as name+"/" fixes it:
// every key below directory a starts with "a/", and no file name contains
// '/', so comparing name+"/" against a sibling file name orders all of a's
// keys correctly against it.
func (d *Dir) walk(ctx context.Context, dirKey, prefix string, fn func(ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(filepath.Join(d.root, filepath.FromSlash(dirKey)))
	if err != nil {
		if isNotExist(err) { // removed concurrently
			return nil
		}
		return err
	}
	type entry struct {
		key string // full key; directories end in "/"
		de  fs.DirEntry
	}
	list := make([]entry, 0, len(entries))
	for _, de := range entries {
		k := dirKey + de.Name()
		if dirKey == "" && de.Name() == StagingDirName {
			continue
		}
		if de.IsDir() {
			k += "/"
			// Descend only if keys below can start with prefix.
			if !strings.HasPrefix(k, prefix) && !strings.HasPrefix(prefix, k) {
				continue
			}
		} else if !de.Type().IsRegular() || !strings.HasPrefix(k, prefix) {
			continue
		}
		list = append(list, entry{k, de})
	}
	slices.SortFunc(list, func(a, b entry) int { return cmp.Compare(a.key, b.key) })
	for _, e := range list {
		if e.de.IsDir() {
			if err := d.walk(ctx, e.key, prefix, fn); err != nil {
				return err
			}
			continue
		}
		fi, err := e.de.Info()
		if err != nil {
			if isNotExist(err) { // deleted concurrently
				continue
			}
			return err
		}
		if err := fn(ObjectInfo{Key: e.key, Size: fi.Size(), LastModified: fi.ModTime()}); err != nil {
			return err
		}
	}
	return nil
}

// isNotExist reports whether err means there is no file at the path,
// including a path that runs through a regular file ("a/b" when a is a file).
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
