package kafkatest

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// javaSources are the Java programs that [Java] runs: one public class per
// file, in the default package, compiled together.
//
//go:embed java/*.java
var javaSources embed.FS

// javaFlags are the JVM options of the Java programs: a small heap, and the
// serial collector, which costs the least CPU on a small machine.
var javaFlags = []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:-UsePerfData"}

// compiled is the process-wide directory of compiled classes.
var compiled struct {
	sync.Mutex
	done bool
	dir  string
	err  error
}

// Java runs the program class (a file java/<class>.java of this package,
// e.g. "Consume" or "Produce") with args and waits for it. stdout and stderr
// are what it printed; err is non-nil when it could not start or exited
// non-zero (the error then carries the end of stderr). Stdin is empty; use
// [JavaCommand] to feed it or to run the program beside the test.
func Java(ctx context.Context, class string, args ...string) (stdout, stderr string, err error) {
	cmd, err := JavaCommand(ctx, class, args...)
	if err != nil {
		return "", "", err
	}
	return run(cmd, "java "+class)
}

// JavaCommand returns the command that runs the program class with args,
// not started: the caller sets Stdin/Stdout/Stderr and starts and waits for
// it (ctx kills it). The programs are compiled once per pom.xml and sources
// (cached like the classpath).
func JavaCommand(ctx context.Context, class string, args ...string) (*exec.Cmd, error) {
	if _, err := fs.Stat(javaSources, "java/"+class+".java"); err != nil {
		return nil, fmt.Errorf("kafkatest: no Java program %s (the programs are java/*.java)", class)
	}
	p, err := tools()
	if err != nil {
		return nil, err
	}
	cp, err := classpath()
	if err != nil {
		return nil, err
	}
	classes, err := compiledClasses(p, cp)
	if err != nil {
		return nil, err
	}
	jargs := append(append([]string{}, javaFlags...), "-cp", classes+":"+cp)
	if logCfg, err := toolsLogConfig(); err == nil {
		jargs = append(jargs, "-Dlog4j2.configurationFile="+logCfg)
	} else {
		return nil, err
	}
	jargs = append(jargs, class)
	return exec.CommandContext(ctx, p.java, append(jargs, args...)...), nil
}

// compiledClasses compiles java/*.java into <pomDir>/java-<hash>/classes
// once, and returns that directory.
func compiledClasses(p toolPaths, cp string) (string, error) {
	compiled.Lock()
	defer compiled.Unlock()
	if compiled.done {
		return compiled.dir, compiled.err
	}
	compiled.dir, compiled.err = compile(p, cp)
	compiled.done = true
	return compiled.dir, compiled.err
}

func compile(p toolPaths, cp string) (string, error) {
	entries, err := fs.ReadDir(javaSources, "java")
	if err != nil {
		return "", err
	}
	var names []string
	var parts [][]byte
	for _, e := range entries {
		b, err := fs.ReadFile(javaSources, "java/"+e.Name())
		if err != nil {
			return "", err
		}
		names = append(names, e.Name())
		parts = append(parts, []byte(e.Name()), b)
	}
	sort.Strings(names)
	base, err := pomDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "java-"+hashOf(parts...))
	classes := filepath.Join(dir, "classes")
	done := filepath.Join(dir, "compiled")
	if _, err := os.Stat(done); err == nil {
		return classes, nil
	}
	err = withLock(func() error {
		if _, err := os.Stat(done); err == nil {
			return nil
		}
		src := filepath.Join(dir, "src")
		for _, d := range []string{src, classes} {
			if err := os.RemoveAll(d); err != nil {
				return err
			}
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		args := []string{"--release", "17", "-encoding", "UTF-8", "-cp", cp, "-d", classes}
		for _, n := range names {
			b, _ := fs.ReadFile(javaSources, "java/"+n)
			f := filepath.Join(src, n)
			if err := os.WriteFile(f, b, 0o644); err != nil {
				return err
			}
			args = append(args, f)
		}
		var out bytes.Buffer
		cmd := exec.Command(p.javac, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kafkatest: javac: %w\n%s", err, out.String())
		}
		return os.WriteFile(done, nil, 0o644)
	})
	if err != nil {
		return "", err
	}
	return classes, nil
}

// run runs cmd, capturing its output; a non-zero exit is an error that
// carries the end of stderr.
func run(cmd *exec.Cmd, what string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("kafkatest: %s: %w\n%s", what, err, tail(stderr.String(), 40))
	}
	return stdout.String(), stderr.String(), err
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// Record is one record as the Consume program prints it.
type Record struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Timestamp is in ms since the epoch; TimestampType is "CreateTime" or
	// "LogAppendTime".
	Timestamp     int64  `json:"timestamp"`
	TimestampType string `json:"timestampType"`
	// Key and Value are nil for a null key or value.
	Key     []byte   `json:"key"`
	Value   []byte   `json:"value"`
	Headers []Header `json:"headers"`
}

// Header is one record header.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// ParseRecords decodes the JSON lines the Consume program printed, in order.
// It fails on a line that is not one record.
func ParseRecords(stdout string) ([]Record, error) {
	var recs []Record
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return recs, fmt.Errorf("kafkatest: record line %d: %w", n, err)
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}
