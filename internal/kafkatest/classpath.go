package kafkatest

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/dirlock"
)

//go:embed pom.xml
var pom []byte

// resolveTimeout bounds one Maven run; a cold ~/.m2 downloads about 40 jars
// (25 MB).
const resolveTimeout = 10 * time.Minute

// resolved is the process-wide classpath, resolved at most once per
// process (an error is kept too, so that a broken Maven fails fast).
var resolved struct {
	sync.Mutex
	done bool
	cp   string
	err  error
}

// classpath returns Kafka's classpath (jars joined with ':'), from the cache
// when it is there and every jar it names exists, else from Maven.
func classpath() (string, error) {
	resolved.Lock()
	defer resolved.Unlock()
	if !resolved.done {
		resolved.cp, resolved.err = resolveClasspath()
		resolved.done = true
	}
	return resolved.cp, resolved.err
}

// cacheRoot is $KAFKATEST_CACHE_DIR, else <os.UserCacheDir>/diskless-sidecar/kafkatest.
func cacheRoot() (string, error) {
	if d := os.Getenv("KAFKATEST_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kafkatest: no cache directory (set KAFKATEST_CACHE_DIR): %w", err)
	}
	return filepath.Join(d, "diskless-sidecar", "kafkatest"), nil
}

// hashOf is the first 16 hex digits of the SHA-256 of the parts.
func hashOf(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// pomDir is <cache>/<hash of pom.xml>, holding pom.xml, classpath.txt and
// the compiled Java programs.
func pomDir() (string, error) {
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "kafka-"+Version+"-"+hashOf(pom)), nil
}

// withLock runs f holding an exclusive lock on <cache>/lock
// (internal/dirlock), so that test binaries running in parallel resolve
// and compile once.
func withLock(f func() error) error {
	root, err := cacheRoot()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	l, err := dirlock.Acquire(filepath.Join(root, "lock"))
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	defer l.Release()
	return f()
}

func resolveClasspath() (string, error) {
	dir, err := pomDir()
	if err != nil {
		return "", err
	}
	cpFile := filepath.Join(dir, "classpath.txt")
	if cp, ok := readClasspath(cpFile); ok {
		return cp, nil
	}
	p, err := tools()
	if err != nil {
		return "", err
	}
	var cp string
	err = withLock(func() error {
		// Another process may have resolved it while this one waited.
		if c, ok := readClasspath(cpFile); ok {
			cp = c
			return nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("kafkatest: %w", err)
		}
		pomFile := filepath.Join(dir, "pom.xml")
		if err := os.WriteFile(pomFile, pom, 0o644); err != nil {
			return fmt.Errorf("kafkatest: %w", err)
		}
		tmp := cpFile + ".tmp"
		ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, p.mvn, "-q", "-B", "-f", pomFile,
			"dependency:build-classpath", "-Dmdep.outputFile="+tmp, "-Dmdep.pathSeparator=:")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kafkatest: mvn dependency:build-classpath on %s: %w\n%s", pomFile, err, out.String())
		}
		c, ok := readClasspath(tmp)
		if !ok {
			return fmt.Errorf("kafkatest: mvn wrote no usable classpath to %s\n%s", tmp, out.String())
		}
		if err := os.Rename(tmp, cpFile); err != nil {
			return fmt.Errorf("kafkatest: %w", err)
		}
		cp = c
		return nil
	})
	return cp, err
}

// readClasspath reads a classpath file and reports whether it names at
// least the broker's jar and every jar it names exists.
func readClasspath(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	cp := strings.TrimSpace(string(b))
	if !strings.Contains(cp, "kafka_2.13-"+Version+".jar") {
		return "", false
	}
	for _, jar := range strings.Split(cp, ":") {
		if _, err := os.Stat(jar); err != nil {
			return "", false
		}
	}
	return cp, true
}
