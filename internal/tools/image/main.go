// Command image builds the sidecar's container image without a container
// engine or registry (go-containerregistry), as `make image` runs it:
//
//	go run ./internal/tools/image -binary bin/linux-amd64/sidecar -arch amd64 \
//	    -tag diskless-sidecar:dev -oci bin/image -tar bin/sidecar-image.tar
//
// The image is empty.Image plus two layers built here: a base layer with
// /etc/passwd and /etc/group (root, and the user sidecar, uid and gid
// 65532), the CA certificates (-ca, the build host's bundle by default),
// /tmp and the data directory /var/lib/diskless owned by the sidecar user;
// then the statically linked binary at /usr/local/bin/sidecar. It runs as
// 65532:65532 with the entrypoint /usr/local/bin/sidecar, working
// directory and data.dir /var/lib/diskless, and the HTTP endpoint on
// 0.0.0.0:9644; everything else comes from DISKLESS_SIDECAR_* variables,
// --config or --set (README.md, Operating it).
//
// Outputs: -oci, an OCI image layout (a directory: skopeo copy
// oci:bin/image docker://…, or crane push); -tar, the same image as a
// `docker load` tarball tagged -tag. Every file and the image have the
// time SOURCE_DATE_EPOCH (0 when unset), so the same binary gives the same
// image digest.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts, which deploy/kubernetes relies on.
const (
	binaryPath = "/usr/local/bin/sidecar"
	dataDir    = "/var/lib/diskless"
	uid        = 65532
	user       = "65532:65532"
	caPath     = "/etc/ssl/certs/ca-certificates.crt"
)

// spec is what one image is built from.
type spec struct {
	binary []byte    // the linux binary, statically linked
	ca     []byte    // PEM CA bundle
	arch   string    // GOARCH of the binary
	time   time.Time // of every file and of the image
}

func main() {
	binary := flag.String("binary", "", "the sidecar binary for linux, built with CGO_ENABLED=0")
	ca := flag.String("ca", caPath, "PEM bundle of CA certificates to put at "+caPath)
	arch := flag.String("arch", "amd64", "GOARCH the binary was built for")
	tag := flag.String("tag", "diskless-sidecar:dev", "image reference of the docker tarball")
	ociDir := flag.String("oci", "", "write an OCI image layout to this directory (replaced)")
	tarPath := flag.String("tar", "", "write a docker-load tarball to this file")
	flag.Parse()
	if err := run(*binary, *ca, *arch, *tag, *ociDir, *tarPath); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(binary, ca, arch, tag, ociDir, tarPath string) error {
	if binary == "" || (ociDir == "" && tarPath == "") {
		return errors.New("need -binary and at least one of -oci, -tar")
	}
	var s spec
	var err error
	if s.binary, err = os.ReadFile(binary); err != nil {
		return err
	}
	if s.ca, err = os.ReadFile(ca); err != nil {
		return fmt.Errorf("CA bundle (install ca-certificates, or pass -ca): %w", err)
	}
	s.arch = arch
	s.time = time.Unix(0, 0).UTC()
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		sec, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		s.time = time.Unix(sec, 0).UTC()
	}
	img, err := build(s)
	if err != nil {
		return err
	}
	if ociDir != "" {
		if err := writeLayout(ociDir, img, tag); err != nil {
			return err
		}
	}
	if tarPath != "" {
		ref, err := name.NewTag(tag)
		if err != nil {
			return err
		}
		if err := tarball.WriteToFile(tarPath, ref, img); err != nil {
			return err
		}
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s (%s)\n", tag, d, arch)
	return nil
}

// writeLayout writes img as the only image of a new OCI layout at dir,
// annotated with tag as its ref name.
func writeLayout(dir string, img v1.Image, tag string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
	}))
}

// build assembles the image: config, base layer, binary layer.
func build(s spec) (v1.Image, error) {
	base, err := layer(s.time, []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, body: []byte("root:x:0:0:root:/root:/sbin/nologin\nsidecar:x:65532:65532:sidecar:" + dataDir + ":/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, body: []byte("root:x:0:\nsidecar:x:65532:\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: caPath[1:], mode: 0o644, body: s.ca},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "var/", mode: 0o755, dir: true},
		{name: "var/lib/", mode: 0o755, dir: true},
		{name: dataDir[1:] + "/", mode: 0o700, dir: true, owner: uid},
	})
	if err != nil {
		return nil, err
	}
	bin, err := layer(s.time, []entry{
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: binaryPath[1:], mode: 0o755, body: s.binary},
	})
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: s.time}, CreatedBy: "internal/tools/image: passwd, group, CA certificates, " + dataDir}},
		mutate.Addendum{Layer: bin, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: s.time}, CreatedBy: "internal/tools/image: " + binaryPath}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", s.arch
	cf.Created = v1.Time{Time: s.time}
	cf.Config = v1.Config{
		Entrypoint: []string{binaryPath},
		User:       user,
		WorkingDir: dataDir,
		Env: []string{
			"PATH=/usr/local/bin",
			"DISKLESS_SIDECAR_DATA_DIR=" + dataDir,
			"DISKLESS_SIDECAR_HTTP_LISTENER=0.0.0.0:9644",
		},
		ExposedPorts: map[string]struct{}{"9092/tcp": {}, "9644/tcp": {}},
		Volumes:      map[string]struct{}{dataDir: {}},
		StopSignal:   "SIGTERM",
		Labels: map[string]string{
			"org.opencontainers.image.title":       "diskless-sidecar",
			"org.opencontainers.image.description": "Kafka-protocol service storing diskless topics in object storage",
		},
	}
	return mutate.ConfigFile(img, cf)
}

// entry is one file or directory of a layer.
type entry struct {
	name  string // relative, directories ending in /
	mode  int64
	dir   bool
	owner int // uid and gid
	body  []byte
}

// layer returns an OCI layer (gzip) holding entries, each with time t.
func layer(t time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, ModTime: t, Uid: e.owner, Gid: e.owner,
			Typeflag: tar.TypeReg, Size: int64(len(e.body)), Format: tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
			h.Name = path.Clean(e.name) + "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
