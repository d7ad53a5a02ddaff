package cache

import (
	"math/rand/v2"
	"testing"
)

// TestIntervals holds the verified-interval set to a bitmap over random
// additions: covers agrees with the bitmap on every range, and the set
// stays sorted, disjoint and merged (no two intervals touch).
func TestIntervals(t *testing.T) {
	const size = 200
	r := rand.New(rand.NewPCG(7, 9))
	for round := range 200 {
		var s intervals
		var bits [size]bool
		for range 1 + r.IntN(20) {
			lo := r.Int64N(size)
			hi := lo + r.Int64N(size-lo+1)
			s.add(lo, hi)
			for i := lo; i < hi; i++ {
				bits[i] = true
			}
			for i := 1; i < len(s); i++ {
				if s[i-1].hi >= s[i].lo || s[i].lo >= s[i].hi {
					t.Fatalf("round %d: set %v not sorted, disjoint and merged", round, s)
				}
			}
			for range 50 {
				lo := r.Int64N(size)
				hi := lo + r.Int64N(size-lo+1)
				want := true
				for i := lo; i < hi; i++ {
					want = want && bits[i]
				}
				if got := s.covers(lo, hi); got != want {
					t.Fatalf("round %d: set %v covers [%d, %d) = %v, want %v", round, s, lo, hi, got, want)
				}
			}
		}
	}
}
