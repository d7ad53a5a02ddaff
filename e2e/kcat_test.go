package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// realTextFile writes at least n lines of real text to a file and returns
// its path and lines: the Go standard library's sources, which mix prose,
// code, punctuation, tabs and UTF-8. Empty lines are left out because kcat
// -l sends each line as one message and an empty message is not a line a
// consumer prints back distinguishably.
func realTextFile(t *testing.T, n int) (string, []string) {
	t.Helper()
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	root := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	var out []string
	errDone := fs.SkipAll
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(l) != "" {
				out = append(out, l)
			}
		}
		if len(out) >= n {
			return errDone
		}
		return nil
	})
	if err != nil && err != errDone {
		t.Fatal(err)
	}
	if len(out) < n {
		t.Fatalf("found only %d lines of text under %s", len(out), root)
	}
	path := filepath.Join(t.TempDir(), "input.txt")
	if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, out
}

func kcat(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	bin := requireTool(t, "kcat")
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// TestKcatEndToEnd produces a real text file of 100k+ lines with
// `kcat -P -l`, consumes it with `kcat -C -e` and requires the same lines in
// the same order (one partition), and that `kcat -L` lists the topic; on
// both metadata logs.
func TestKcatEndToEnd(t *testing.T) {
	t.Parallel()
	requireTool(t, "kcat")
	forEachBackend(t, func(t *testing.T, sets []string) {
		runKcatEndToEnd(t, StartSidecar(t, "", sets...))
	})
}

func runKcatEndToEnd(t *testing.T, sc *Sidecar) {
	ctx := testCtx(t, 5*time.Minute)
	path, want := realTextFile(t, 100_000)
	const topic = "kcat-lines" // auto-created with num.partitions=1

	kcat(t, ctx, "-b", sc.Addr, "-P", "-t", topic, "-l", path)
	out := kcat(t, ctx, "-b", sc.Addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")
	got := lines(out)
	if len(got) != len(want) {
		t.Fatalf("consumed %d lines, produced %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}

	meta := kcat(t, ctx, "-b", sc.Addr, "-L")
	if !strings.Contains(meta, `topic "`+topic+`" with 1 partitions`) {
		t.Fatalf("kcat -L does not list %s:\n%s", topic, meta)
	}
}

// TestKcatCompressedCRC produces with every librdkafka codec and consumes
// with check.crcs=true, so librdkafka verifies every batch CRC it receives.
func TestKcatCompressedCRC(t *testing.T) {
	t.Parallel()
	requireTool(t, "kcat")
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 5*time.Minute)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "kcat-" + codec
			var in strings.Builder
			for i := range 2000 {
				in.WriteString(strings.Repeat(codec, 1+i%7))
				in.WriteString("\n")
			}
			cmd := exec.CommandContext(ctx, requireTool(t, "kcat"), "-b", sc.Addr, "-P", "-t", topic, "-z", codec)
			cmd.Stdin = strings.NewReader(in.String())
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kcat -P -z %s: %v\n%s", codec, err, out)
			}
			out := kcat(t, ctx, "-b", sc.Addr, "-C", "-t", topic, "-e", "-q", "-X", "check.crcs=true", "-f", "%s\n")
			if out != in.String() {
				sc := bufio.NewScanner(strings.NewReader(out))
				n := 0
				for sc.Scan() {
					n++
				}
				t.Fatalf("consumed %d lines that differ from the 2000 produced", n)
			}
		})
	}
}
