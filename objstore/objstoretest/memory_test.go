package objstoretest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

func TestMemoryConformance(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store { return objstoretest.NewMemory() })
}

func TestMemoryFaultAndCount(t *testing.T) {
	m := objstoretest.NewMemory()
	ctx := t.Context()
	errBoom := errors.New("boom")
	m.SetFault(func(_ context.Context, op objstoretest.Op, key string) error {
		if op == objstoretest.OpPut && key == "bad" {
			return errBoom
		}
		return nil
	})
	if err := m.Put(ctx, "bad", []byte("x")); !errors.Is(err, errBoom) {
		t.Fatalf("Put(bad) = %v, want the fault", err)
	}
	if err := m.Put(ctx, "good", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.ReadRange(ctx, "bad", 0, make([]byte, 1)); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("a faulted Put stored the object: %v", err)
	}
	m.SetFault(nil)
	if err := m.Put(ctx, "bad", []byte("x")); err != nil {
		t.Fatalf("Put after removing the fault: %v", err)
	}
	if got := m.Count(objstoretest.OpPut); got != 3 {
		t.Errorf("Count(put) = %d, want 3 (faulted calls count)", got)
	}
	if got := m.Count(objstoretest.OpReadRange); got != 1 {
		t.Errorf("Count(readrange) = %d, want 1", got)
	}
}

func TestMemoryBlockingFaultHonoursContext(t *testing.T) {
	m := objstoretest.NewMemory()
	m.SetFault(func(ctx context.Context, _ objstoretest.Op, _ string) error {
		<-ctx.Done() // a store that hangs
		return ctx.Err()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := m.Put(ctx, "k", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Put = %v, want DeadlineExceeded", err)
	}
}

func TestMemoryClock(t *testing.T) {
	m := objstoretest.NewMemory()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	m.SetClock(func() time.Time { return at })
	if err := m.Put(t.Context(), "k", nil); err != nil {
		t.Fatal(err)
	}
	err := m.List(t.Context(), "", func(oi objstore.ObjectInfo) error {
		if !oi.LastModified.Equal(at) {
			t.Errorf("LastModified = %v, want %v", oi.LastModified, at)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
