package main

import "testing"

func TestFormat(t *testing.T) {
	const mod = "example.com/m"
	list := `example.com/m/server example.com/m/diskless context example.com/m/internal/topicconfig
example.com/m/produce example.com/m/wal example.com/m/internal/batch example.com/m/internal/backoff example.com/m/diskless
example.com/m/wal bytes
example.com/m/internal/batch
other.org/x example.com/m/wal
`
	got := Format(Parse(list, mod))
	want := "produce → diskless, internal/{backoff, batch}, wal\n" +
		"server  → diskless, internal/topicconfig\n" +
		"(import none: internal/batch, wal)\n"
	if got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
}

func TestBlock(t *testing.T) {
	doc := "# D\n\ntext\n\n<!-- importgraph: generated -->\n```\nold → x\n```\n\nafter\n"
	before, block, after, err := Block(doc)
	if err != nil {
		t.Fatal(err)
	}
	if block != "old → x\n" {
		t.Errorf("block %q", block)
	}
	if before+"new → y\n"+after != "# D\n\ntext\n\n<!-- importgraph: generated -->\n```\nnew → y\n```\n\nafter\n" {
		t.Errorf("rewrite: %q", before+"new → y\n"+after)
	}
	for _, bad := range []string{"# D\n", "# D\n<!-- importgraph -->\nno block\n", "# D\n<!-- importgraph -->\n```\nopen\n"} {
		if _, _, _, err := Block(bad); err == nil {
			t.Errorf("Block(%q): no error", bad)
		}
	}
}
