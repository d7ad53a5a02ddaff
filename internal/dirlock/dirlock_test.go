package dirlock

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestTryAcquire(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".lock")
	l, err := TryAcquire(path)
	if err != nil {
		t.Fatal(err)
	}
	// A second lock conflicts, in this process too (another open file).
	if _, err := TryAcquire(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second TryAcquire: %v, want ErrLocked", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	l2, err := TryAcquire(path)
	if err != nil {
		t.Fatalf("TryAcquire after Release: %v", err)
	}
	l2.Release()
}

func TestAcquireWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	l, err := TryAcquire(path)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := Acquire(path)
		if err == nil {
			err = l2.Release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Acquire returned %v while the lock was held", err)
	case <-time.After(100 * time.Millisecond):
	}
	l.Release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not return after Release")
	}
}

func TestTryAcquireMissingDir(t *testing.T) {
	if _, err := TryAcquire(filepath.Join(t.TempDir(), "no", ".lock")); err == nil || errors.Is(err, ErrLocked) {
		t.Fatalf("TryAcquire in a missing directory: %v, want an IO error", err)
	}
}
