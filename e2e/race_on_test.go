//go:build race

package e2e

// raceEnabled builds the sidecar under test with -race too.
const raceEnabled = true
