package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMkdirAllAndWriteFile(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "c")
	if err := MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(dir); err != nil { // idempotent
		t.Fatal(err)
	}
	p := filepath.Join(dir, "f")
	for _, body := range []string{"first", "second, longer"} {
		if err := WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != body {
			t.Fatalf("read back %q, %v; want %q", got, err, body)
		}
	}
	if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temp file left behind: %v", err)
	}
	if err := WriteFile(filepath.Join(root, "missing", "f"), nil, 0o644); err == nil {
		t.Fatal("WriteFile into a missing directory succeeded")
	}
	if err := SyncDir(filepath.Join(root, "missing")); err == nil {
		t.Fatal("SyncDir of a missing directory succeeded")
	}
}
