package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/magiconair/properties"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// manifestsDir holds the Kubernetes manifests (deploy/kubernetes/README.md).
const manifestsDir = "../deploy/kubernetes"

// manifests are the decoded documents of every YAML file under
// manifestsDir, by kind.
type manifests struct {
	statefulSets []*appsv1.StatefulSet
	pdbs         []*policyv1.PodDisruptionBudget
	configMaps   []*corev1.ConfigMap
	services     []*corev1.Service
	custom       []map[string]any // kafka.strimzi.io resources: no Go types to check them against
}

// loadManifests decodes every document strictly with the Kubernetes API
// types: a field the type does not have, a wrong type or an unknown kind
// fails the test.
func loadManifests(t *testing.T) manifests {
	t.Helper()
	var files []string
	err := filepath.WalkDir(manifestsDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("only %d manifests under %s", len(files), manifestsDir)
	}
	var m manifests
	sep := regexp.MustCompile(`(?m)^---\s*$`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range sep.Split(string(raw), -1) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s #%d: %v", f, i, err)
			}
			if tm.Kind == "" {
				if strings.TrimSpace(stripComments(doc)) != "" {
					t.Fatalf("%s #%d: a document without kind", f, i)
				}
				continue
			}
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 StatefulSet":
				o := new(appsv1.StatefulSet)
				m.statefulSets, obj = append(m.statefulSets, o), o
			case "policy/v1 PodDisruptionBudget":
				o := new(policyv1.PodDisruptionBudget)
				m.pdbs, obj = append(m.pdbs, o), o
			case "v1 ConfigMap":
				o := new(corev1.ConfigMap)
				m.configMaps, obj = append(m.configMaps, o), o
			case "v1 Service":
				o := new(corev1.Service)
				m.services, obj = append(m.services, o), o
			case "v1 ServiceAccount":
				obj = new(corev1.ServiceAccount)
			case "kafka.strimzi.io/v1beta2 Kafka", "kafka.strimzi.io/v1beta2 KafkaNodePool":
				var o map[string]any
				if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
					t.Fatalf("%s #%d: %v", f, i, err)
				}
				if _, ok := o["spec"].(map[string]any); !ok {
					t.Fatalf("%s #%d: %s without spec", f, i, tm.Kind)
				}
				m.custom = append(m.custom, o)
				continue
			default:
				t.Fatalf("%s #%d: kind %s %s has no decoder in this test", f, i, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s #%d (%s): %v", f, i, tm.Kind, err)
			}
		}
	}
	return m
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// configKeys returns the keys the real binary knows, from its --help.
func configKeys(t *testing.T) map[string]bool {
	t.Helper()
	skipIfShort(t)
	var out bytes.Buffer
	cmd := exec.Command(sidecarBin, "--help")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("sidecar --help: %v\n%s", err, out.String())
	}
	keys := make(map[string]bool)
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z0-9.]+) \(default `).FindAllStringSubmatch(out.String(), -1) {
		keys[m[1]] = true
	}
	if !keys["node.id"] || len(keys) < 20 {
		t.Fatalf("parsed %d keys from --help:\n%s", len(keys), out.String())
	}
	return keys
}

// TestKubernetesManifests decodes deploy/kubernetes strictly and checks what
// running the sidecar there depends on: node.id from the pod ordinal, the
// probes on /healthz and /readyz of the HTTP port, a grace period past
// shutdown.timeout.ms, resource requests, a PodDisruptionBudget over the
// pods, and config keys (variables and properties files) the binary knows.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	keys := configKeys(t)
	var sidecars int
	for _, cm := range m.configMaps {
		for name, body := range cm.Data {
			if !strings.HasSuffix(name, ".properties") {
				continue
			}
			p, err := properties.LoadString(body)
			if err != nil {
				t.Fatalf("ConfigMap %s/%s: %v", cm.Name, name, err)
			}
			for _, k := range p.Keys() {
				if !keys[k] {
					t.Errorf("ConfigMap %s/%s: unknown key %s", cm.Name, name, k)
				}
			}
		}
	}
	for _, ss := range m.statefulSets {
		pod := ss.Spec.Template
		sel, err := metav1.LabelSelectorAsSelector(ss.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			t.Errorf("StatefulSet %s: selector %v does not match its pods (%v)", ss.Name, ss.Spec.Selector, err)
		}
		covered := false
		for _, pdb := range m.pdbs {
			s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err == nil && pdb.Namespace == ss.Namespace && s.Matches(labels.Set(pod.Labels)) &&
				pdb.Spec.MaxUnavailable != nil && pdb.Spec.MaxUnavailable.IntValue() == 1 {
				covered = true
			}
		}
		if !covered {
			t.Errorf("StatefulSet %s: no PodDisruptionBudget with maxUnavailable 1 over its pods", ss.Name)
		}
		if len(ss.Spec.VolumeClaimTemplates) == 0 {
			t.Errorf("StatefulSet %s: no volumeClaimTemplates (data.dir must outlive the pod)", ss.Name)
		}
		for _, c := range pod.Spec.Containers {
			if c.Name != "diskless-sidecar" {
				continue
			}
			sidecars++
			checkSidecarContainer(t, ss, c, keys)
		}
	}
	if sidecars < 2 {
		t.Fatalf("%d sidecar containers in %d StatefulSets, want the plain and the Strimzi example", sidecars, len(m.statefulSets))
	}
	if len(m.custom) != 2 {
		t.Errorf("%d Strimzi resources, want Kafka and KafkaNodePool", len(m.custom))
	}
}

func checkSidecarContainer(t *testing.T, ss *appsv1.StatefulSet, c corev1.Container, keys map[string]bool) {
	t.Helper()
	name := ss.Name + "/" + c.Name
	env := make(map[string]corev1.EnvVar)
	for _, e := range c.Env {
		env[e.Name] = e
		if k, ok := strings.CutPrefix(e.Name, "DISKLESS_SIDECAR_"); ok {
			if key := strings.ToLower(strings.ReplaceAll(k, "_", ".")); !keys[key] {
				t.Errorf("%s: %s names no config key (%s)", name, e.Name, key)
			}
		}
	}
	id := env["DISKLESS_SIDECAR_NODE_ID"]
	if id.ValueFrom == nil || id.ValueFrom.FieldRef == nil || id.ValueFrom.FieldRef.FieldPath != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("%s: node.id is not the pod ordinal: %+v", name, id)
	}
	if adv := env["DISKLESS_SIDECAR_ADVERTISED_LISTENERS"].Value; !strings.Contains(adv, "$(POD_NAME)."+ss.Spec.ServiceName+".") {
		t.Errorf("%s: advertised.listeners %q is not the pod's name under the headless service %s", name, adv, ss.Spec.ServiceName)
	}
	httpPort := int32(9644) // the image's DISKLESS_SIDECAR_HTTP_LISTENER
	ports := make(map[string]int32)
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, pr := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{
		{"startupProbe", c.StartupProbe, "/healthz"},
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
	} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s", name, pr.what)
			continue
		}
		g := pr.probe.HTTPGet
		port := g.Port.IntVal
		if g.Port.StrVal != "" {
			port = ports[g.Port.StrVal]
		}
		if g.Path != pr.path || port != httpPort {
			t.Errorf("%s: %s GET %s on port %v (%d), want %s on %d", name, pr.what, g.Path, g.Port.String(), port, pr.path, httpPort)
		}
	}
	req := c.Resources.Requests
	if req.Cpu().IsZero() || req.Memory().IsZero() || c.Resources.Limits.Memory().Cmp(*req.Memory()) < 0 {
		t.Errorf("%s: resources %+v", name, c.Resources)
	}
	if g := ss.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g <= 30 {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want more than shutdown.timeout.ms (30 s)", name, g)
	}
	sc := c.SecurityContext
	psc := ss.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: want a read-only root file system and runAsNonRoot", name)
	}
	mounted := false
	for _, v := range c.VolumeMounts {
		if v.MountPath == "/var/lib/diskless" {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("%s: nothing mounted at data.dir /var/lib/diskless", name)
	}
}

// TestKubernetesProbesServed: the paths the manifests' probes GET answer
// 200 on a running sidecar's HTTP endpoint.
func TestKubernetesProbesServed(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	sc := StartSidecar(t, "")
	paths := make(map[string]bool)
	for _, ss := range m.statefulSets {
		for _, c := range ss.Spec.Template.Spec.Containers {
			for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
				if c.Name == "diskless-sidecar" && p != nil && p.HTTPGet != nil {
					paths[p.HTTPGet.Path] = true
				}
			}
		}
	}
	if !paths["/healthz"] || !paths["/readyz"] {
		t.Fatalf("probe paths %v", paths)
	}
	for p := range paths {
		if code, body := httpGet(t, "http://"+sc.HTTP+p); code != 200 {
			t.Errorf("GET %s: %d %q", p, code, body)
		}
	}
}
