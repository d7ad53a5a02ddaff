package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// writeTree writes files (slash path → contents) under a new directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

var docs = map[string]string{
	"SPEC.md": "# Facts\n\n## 1. Record batch v2\n\ntext\n\n## 4. Fetch\n\n## 13. Reference figures\n",
	"DESIGN.md": "# Design\n\n## Fetch\n\n1. plan\n2. wait\n3. read through the cache\n\n" +
		"## Object storage\n\n**Measured** here.\n\n## Invariants\n\n1. **No loss.**\n2. **Dense offsets.**\n\n" +
		"## Decisions\n\n- one\n",
	"docs/format/wal.md": "# WAL\n\n## Keys\n\n## Group end\n\nSee [Keys](#keys) and [SPEC](../../SPEC.md#4-fetch).\n",
}

func withDocs(extra map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range docs {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// TestResolvingReferences: every form the checker knows, written so that
// it resolves, reports nothing.
func TestResolvingReferences(t *testing.T) {
	root := writeTree(t, withDocs(map[string]string{
		"a/a.go": `// Package a cites SPEC §1 and SPEC §4, §13, a list SPEC §1–§4, and
// one wrapped across lines (SPEC
// §13). DESIGN §Fetch step 3 reads, DESIGN §Object storage, Measured
// timed it; DESIGN.md §Decisions; DESIGN invariant 2 and DESIGN
// invariants 1 and 2; docs/format/wal.md §Group end; SPEC §4's rule.
package a

/* A block comment: DESIGN §Invariants. */
var X = "SPEC §99 in a string is not a comment"
`,
		"docs/format/other.md": "# Other\n\nAs [wal.md](wal.md) §Keys says, and wal.md §Keys again.\n" +
			"`SPEC §99` in code is skipped.\n\n```\nDESIGN §Nowhere in a fence\n```\n",
	}))
	problems, n, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("unexpected: %s", p)
	}
	if n < 15 {
		t.Errorf("checked %d references, want ≥ 15", n)
	}
}

// TestBrokenReferences: each kind of broken reference is reported at its
// file and line.
func TestBrokenReferences(t *testing.T) {
	root := writeTree(t, withDocs(map[string]string{
		"b/b.go": `package b

// Missing section: SPEC §14.
// In a list: SPEC §1, §2.
// No such heading: DESIGN §Coordinators.
// No such step: DESIGN §Fetch step 9.
// A document outside the repository: STYLE §Tests.
// No such invariant: DESIGN invariant 7.
// Wrapped, missing: docs/format/wal.md
// §Torn tail rule.
// No such file: docs/format/gone.md §Keys.
func B() {}
`,
		"README.md": "# R\n\nSee [the spec](SPEC.md#9-coordinator-rpcs) and [gone](nope.md).\n" +
			"And [Keys](docs/format/wal.md) §Nothing.\n",
	}))
	problems, _, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.File+":"+strconv.Itoa(p.Line)+" "+p.Ref)
	}
	want := []string{
		"README.md:3 [the spec](SPEC.md#9-coordinator-rpcs)",
		"README.md:3 [gone](nope.md)",
		"README.md:4 docs/format/wal.md §Nothing.",
		"b/b.go:3 SPEC §14",
		"b/b.go:4 SPEC §2",
		"b/b.go:5 DESIGN §Coordinators.",
		"b/b.go:6 DESIGN §Fetch step 9",
		"b/b.go:7 STYLE §Tests.",
		"b/b.go:8 DESIGN invariant 7",
		"b/b.go:9 docs/format/wal.md §Torn tail rule.",
		"b/b.go:11 docs/format/gone.md §Keys.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("reported:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, p := range problems {
		if p.Why == "" || !strings.Contains(p.String(), p.File+":") {
			t.Errorf("problem without a reason or position: %+v", p)
		}
	}
}
