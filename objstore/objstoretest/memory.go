package objstoretest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/diskless-sidecar/sidecar/objstore"
)

// Op names a Store operation, for Memory's fault hook and counters.
type Op string

// The Store operations.
const (
	OpPut       Op = "put"
	OpReadRange Op = "readrange"
	OpDelete    Op = "delete"
	OpList      Op = "list"
)

// FaultFunc is called by Memory before each operation, with the operation's
// ctx, the operation and its key (the prefix for OpList). A non-nil error
// fails the operation and is returned as is; the function may also block,
// e.g. until ctx is done, to simulate a slow store. It is called
// concurrently by concurrent operations.
type FaultFunc func(ctx context.Context, op Op, key string) error

// Memory is an in-memory objstore.Store for tests (it passes Run, as every
// backend does): it keeps objects in a map, copies
// data in and out, and validates keys like every backend. SetFault injects
// errors and delays; Count tells how many requests a scenario cost.
type Memory struct {
	fault  atomic.Pointer[FaultFunc]
	now    atomic.Pointer[func() time.Time]
	counts [4]atomic.Int64 // indexed by opIndex

	mu struct {
		sync.RWMutex
		objects map[string]memObject // guarded by mu
	}
}

type memObject struct {
	data     []byte // never modified once stored
	modified time.Time
}

var _ objstore.Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	m := &Memory{}
	m.mu.objects = make(map[string]memObject)
	return m
}

// SetFault installs f as the fault hook (nil removes it). It may be called
// at any time, also while operations run.
func (m *Memory) SetFault(f FaultFunc) {
	if f == nil {
		m.fault.Store(nil)
		return
	}
	m.fault.Store(&f)
}

// SetClock makes LastModified come from now instead of time.Now, e.g. for
// tests of age-based deletion. nil restores time.Now.
func (m *Memory) SetClock(now func() time.Time) {
	if now == nil {
		m.now.Store(nil)
		return
	}
	m.now.Store(&now)
}

// Count returns how many times op has been called, including calls that
// failed (by fault, cancellation or invalid key): with S3 every call is a
// billed request.
func (m *Memory) Count(op Op) int64 {
	return m.counts[opIndex(op)].Load()
}

func opIndex(op Op) int {
	switch op {
	case OpPut:
		return 0
	case OpReadRange:
		return 1
	case OpDelete:
		return 2
	case OpList:
		return 3
	}
	panic(fmt.Sprintf("objstore: unknown op %q", op))
}

// begin counts op and runs the checks every operation starts with.
func (m *Memory) begin(ctx context.Context, op Op, key string) error {
	m.counts[opIndex(op)].Add(1)
	if op != OpList {
		if err := objstore.ValidateKey(key); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: %s %s: %w", op, key, err)
	}
	if f := m.fault.Load(); f != nil {
		if err := (*f)(ctx, op, key); err != nil {
			return err
		}
	}
	return nil
}

// Put implements Store.Put. It stores a copy of data.
func (m *Memory) Put(ctx context.Context, key string, data []byte) error {
	if err := m.begin(ctx, OpPut, key); err != nil {
		return err
	}
	now := time.Now
	if p := m.now.Load(); p != nil {
		now = *p
	}
	obj := memObject{data: slices.Clone(data), modified: now()}
	if obj.data == nil {
		obj.data = []byte{}
	}
	m.mu.Lock()
	m.mu.objects[key] = obj
	m.mu.Unlock()
	return nil
}

// ReadRange implements Store.ReadRange.
func (m *Memory) ReadRange(ctx context.Context, key string, off int64, p []byte) (int, int64, error) {
	if err := m.begin(ctx, OpReadRange, key); err != nil {
		return 0, 0, err
	}
	if off < 0 {
		return 0, 0, fmt.Errorf("objstore: read %s: negative offset %d", key, off)
	}
	m.mu.RLock()
	obj, ok := m.mu.objects[key]
	m.mu.RUnlock()
	if !ok {
		return 0, 0, fmt.Errorf("objstore: read %s: %w", key, objstore.ErrNotExist)
	}
	size := int64(len(obj.data))
	if off >= size {
		return 0, size, nil
	}
	return copy(p, obj.data[off:]), size, nil
}

// Delete implements Store.Delete.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := m.begin(ctx, OpDelete, key); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.mu.objects, key)
	m.mu.Unlock()
	return nil
}

// List implements Store.List. It lists a snapshot taken when it starts, and
// holds no lock while calling fn.
func (m *Memory) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	if err := m.begin(ctx, OpList, prefix); err != nil {
		return err
	}
	m.mu.RLock()
	var infos []objstore.ObjectInfo
	for k, obj := range m.mu.objects {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, objstore.ObjectInfo{Key: k, Size: int64(len(obj.data)), LastModified: obj.modified})
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(infos, func(a, b objstore.ObjectInfo) int { return cmp.Compare(a.Key, b.Key) })
	for _, oi := range infos {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("objstore: list %q: %w", prefix, err)
		}
		if err := fn(oi); err != nil {
			return err
		}
	}
	return nil
}
