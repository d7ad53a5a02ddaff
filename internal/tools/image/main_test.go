package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage builds the sidecar as `make image` does (CGO_ENABLED=0, for
// this machine's GOARCH), builds both outputs, reads each back and checks
// the entrypoint, the user, the files of the base layer, and that the
// binary in the image is byte-identical to the one built and statically
// linked; then runs that binary to see it take its config from
// DISKLESS_SIDECAR_* variables.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sidecar; skipped with -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the image holds a linux binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sidecar")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "../../../cmd/sidecar") // as the Makefile's image target
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.pem")
	caBody := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	if err := os.WriteFile(ca, caBody, 0o644); err != nil {
		t.Fatal(err)
	}
	ociDir, tarPath := filepath.Join(dir, "oci"), filepath.Join(dir, "image.tar")
	if err := run(bin, ca, runtime.GOARCH, "diskless-sidecar:test", ociDir, tarPath); err != nil {
		t.Fatal(err)
	}

	idx, err := layout.ImageIndexFromPath(ociDir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "diskless-sidecar:test" {
		t.Fatalf("layout index: %+v", im.Manifests)
	}
	fromLayout, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	fromTar, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := fromLayout.Digest()
	d2, _ := fromTar.Digest()
	cf1, _ := fromLayout.ConfigName()
	cf2, _ := fromTar.ConfigName()
	if cf1 != cf2 {
		t.Fatalf("the layout's config %s differs from the tarball's %s (digests %s, %s)", cf1, cf2, d1, d2)
	}

	for name, img := range map[string]v1.Image{"layout": fromLayout, "tarball": fromTar} {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if !slices.Equal(c.Entrypoint, []string{binaryPath}) || c.User != "65532:65532" || c.WorkingDir != dataDir ||
			cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !slices.Contains(c.Env, "DISKLESS_SIDECAR_DATA_DIR="+dataDir) {
			t.Fatalf("%s: config %+v (%s/%s)", name, c, cf.OS, cf.Architecture)
		}
		files := extract(t, img)
		if got := files[binaryPath[1:]]; !bytes.Equal(got.body, want) || got.mode != 0o755 {
			t.Fatalf("%s: %s is %d bytes mode %o, want the %d bytes built, mode 755", name, binaryPath, len(got.body), got.mode, len(want))
		}
		if !strings.Contains(string(files["etc/passwd"].body), "sidecar:x:65532:65532:") ||
			!bytes.Equal(files[caPath[1:]].body, caBody) {
			t.Fatalf("%s: passwd %q, CA bundle %q", name, files["etc/passwd"].body, files[caPath[1:]].body)
		}
		if d := files[dataDir[1:]]; d.uid != uid || !d.dir {
			t.Fatalf("%s: %s: %+v, want a directory owned by %d", name, dataDir, d, uid)
		}
	}

	// Statically linked: no interpreter, no shared libraries.
	f, err := elf.NewFile(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary has an ELF interpreter: not statically linked")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the binary needs %v", libs)
	}

	// The binary out of the image takes its keys from the environment: a bad
	// node.id there stops start-up with exit code 2 naming the key.
	out := filepath.Join(dir, "from-image")
	if err := os.WriteFile(out, extract(t, fromLayout)[binaryPath[1:]].body, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(out)
	cmd.Env = []string{"DISKLESS_SIDECAR_NODE_ID=not-a-number", "DISKLESS_SIDECAR_DATA_DIR=" + filepath.Join(dir, "data")}
	msg, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(msg), "node.id") {
		t.Fatalf("DISKLESS_SIDECAR_NODE_ID=not-a-number: %v\n%s", err, msg)
	}
}

// TestImageReproducible: the same inputs give the same image digest.
func TestImageReproducible(t *testing.T) {
	s := spec{binary: []byte("\x7fELF not really"), ca: []byte("ca"), arch: "arm64"}
	var digests []v1.Hash
	for range 2 {
		img, err := build(s)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	s.binary = []byte("\x7fELF another")
	img, err := build(s)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := img.Digest()
	if digests[0] != digests[1] || other == digests[0] {
		t.Fatalf("digests %v, with another binary %v", digests, other)
	}
}

type file struct {
	body []byte
	mode int64
	uid  int
	dir  bool
}

// extract returns the image's flattened file system by path.
func extract(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := make(map[string]file)
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[path.Clean(h.Name)] = file{body: body, mode: h.Mode, uid: h.Uid, dir: h.Typeflag == tar.TypeDir}
	}
}
