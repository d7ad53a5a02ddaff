package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

func TestDirConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		d, err := objstore.NewDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

func newDir(t *testing.T) (*objstore.Dir, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "objects") // NewDir creates it
	d, err := objstore.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	return d, root
}

func stagingEntries(t *testing.T, root string) []os.DirEntry {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(root, objstore.StagingDirName))
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestDirLayout(t *testing.T) {
	d, root := newDir(t)
	if err := d.Put(t.Context(), "wal/ab/cd", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "wal", "ab", "cd"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("file root/wal/ab/cd = %q, %v; want hello", got, err)
	}
	if es := stagingEntries(t, root); len(es) != 0 {
		t.Fatalf("staging dir holds %d entries after a successful Put", len(es))
	}
}

func TestDirRemovesStaleTempFilesAtOpen(t *testing.T) {
	d, root := newDir(t)
	if err := d.Put(t.Context(), "kept", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// What a crash between write and rename leaves behind.
	stale := filepath.Join(root, objstore.StagingDirName, "put-123")
	if err := os.WriteFile(stale, []byte("half an obj"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := objstore.NewDir(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale temp file survived reopening: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "kept")); err != nil {
		t.Fatalf("reopening removed an object: %v", err)
	}
}

func TestDirStagingIsNotInKeySpace(t *testing.T) {
	d, root := newDir(t)
	// A temp file in flight must not be listed.
	if err := os.WriteFile(filepath.Join(root, objstore.StagingDirName, "put-1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.List(t.Context(), "", func(oi objstore.ObjectInfo) error {
		return fmt.Errorf("listed %q", oi.Key)
	}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{objstore.StagingDirName, objstore.StagingDirName + "/put-1"} {
		if err := d.Put(t.Context(), key, nil); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v; want ErrInvalidKey", key, err)
		}
		if _, _, err := d.ReadRange(t.Context(), key, 0, make([]byte, 1)); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("ReadRange(%q) = %v; want ErrInvalidKey", key, err)
		}
		if err := d.Delete(t.Context(), key); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v; want ErrInvalidKey", key, err)
		}
	}
}

func TestDirNeverEscapesRoot(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	d, err := objstore.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"../outside", "a/../../outside", "/tmp/outside", `..\outside`} {
		if err := d.Put(t.Context(), key, []byte("x")); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v; want ErrInvalidKey", key, err)
		}
	}
	es, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 {
		t.Fatalf("parent of root holds %d entries, want only root", len(es))
	}
}

func TestDirFailedPutLeavesNothing(t *testing.T) {
	d, root := newDir(t)
	ctx := t.Context()
	if err := d.Put(ctx, "f", []byte("file")); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "dir/x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// A key below a file, and a key that is a directory: both fail in a
	// directory tree (S3 would accept them; callers never make them).
	for _, key := range []string{"f/below", "dir"} {
		if err := d.Put(ctx, key, []byte("new")); err == nil {
			t.Errorf("Put(%q) succeeded", key)
		}
	}
	if es := stagingEntries(t, root); len(es) != 0 {
		t.Fatalf("failed Puts left %d temp files", len(es))
	}
	// Cancelled after the write, before the rename: nothing either.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Put(cctx, "cancelled", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with cancelled ctx = %v", err)
	}
	if es := stagingEntries(t, root); len(es) != 0 {
		t.Fatalf("cancelled Put left %d temp files", len(es))
	}
	// The directory "dir" is not an object: Delete leaves it, ReadRange says so.
	if err := d.Delete(ctx, "dir"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.ReadRange(ctx, "dir/x", 0, make([]byte, 1)); err != nil {
		t.Fatalf("Delete(dir) removed dir/x: %v", err)
	}
}

func BenchmarkDirReadRange(b *testing.B) {
	d, err := objstore.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	const objSize = 8 << 20 // the default WAL file size (SPEC §11)
	obj := make([]byte, objSize)
	if err := d.Put(b.Context(), "wal/obj", obj); err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("read=%dKiB", size>>10), func(b *testing.B) {
			p := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			off := int64(0)
			for b.Loop() {
				if _, _, err := d.ReadRange(b.Context(), "wal/obj", off, p); err != nil {
					b.Fatal(err)
				}
				off = (off + int64(size)) % (objSize - int64(size))
			}
		})
	}
}
