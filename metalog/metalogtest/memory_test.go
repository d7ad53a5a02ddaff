package metalogtest

import (
	"errors"
	"testing"

	"github.com/diskless-sidecar/sidecar/metalog"
)

func TestMemoryConformance(t *testing.T) {
	Run(t, Backend{New: func(*testing.T) Store { return &Memory{} }, Fences: true})
}

func TestMemoryFollowerConformance(t *testing.T) {
	RunFollower(t, func(*testing.T) FollowStore { return &Memory{} })
}

// TestMemoryDiscard: a Memory that discards keeps the record indexes but
// no body, and says so when asked to replay one.
func TestMemoryDiscard(t *testing.T) {
	m := &Memory{Discard: true}
	l, err := m.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := l.Replay(ctx, 0, ignore); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, bodies("a", 3)); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, bodies("b", 2)); err != nil {
		t.Fatal(err)
	}
	if next, err := l.Replay(ctx, 5, ignore); err != nil || next != 5 {
		t.Fatalf("replay from the end: %d, %v", next, err)
	}
	if _, err := l.Replay(ctx, 0, ignore); !errors.Is(err, metalog.ErrCorrupt) {
		t.Fatalf("replay of discarded records: %v, want ErrCorrupt", err)
	}
}
