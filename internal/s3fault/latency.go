package s3fault

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Band is one part of a latency distribution: with probability Weight
// (relative to the other bands' weights) a request's latency is drawn
// uniformly from [Min, Max].
type Band struct {
	Weight   float64
	Min, Max time.Duration
}

// Dist is a latency distribution, a mixture of uniform bands: a first
// draw picks a band by weight, a second the latency inside it.
type Dist []Band

// draw returns one latency of d, from r.
func (d Dist) draw(r *rand.Rand) time.Duration {
	var total float64
	for _, b := range d {
		total += b.Weight
	}
	x := r.Float64() * total
	for i, b := range d {
		if x < b.Weight || i == len(d)-1 {
			return b.Min + time.Duration(r.Int64N(int64(b.Max-b.Min)+1))
		}
		x -= b.Weight
	}
	return 0 // empty Dist
}

// Quantile returns the latency below which the fraction q of d's draws
// fall (q in [0, 1]), by interpolating inside the band q lands in.
func (d Dist) Quantile(q float64) time.Duration {
	var total float64
	for _, b := range d {
		total += b.Weight
	}
	x := q * total
	for i, b := range d {
		if x <= b.Weight || i == len(d)-1 {
			f := min(1, x/b.Weight)
			return b.Min + time.Duration(f*float64(b.Max-b.Min))
		}
		x -= b.Weight
	}
	return 0
}

// String writes d as ParseLatency reads it: "w:min-max" per band, in
// milliseconds, or "min-max" for a single band.
func (d Dist) String() string {
	ms := func(t time.Duration) string { return strconv.FormatFloat(float64(t)/1e6, 'f', -1, 64) }
	if len(d) == 1 {
		return ms(d[0].Min) + "-" + ms(d[0].Max)
	}
	parts := make([]string, len(d))
	for i, b := range d {
		parts[i] = strconv.FormatFloat(b.Weight, 'f', -1, 64) + ":" + ms(b.Min) + "-" + ms(b.Max)
	}
	return strings.Join(parts, ",")
}

// LatencyModel gives requests of some kinds the latency of a real object
// store: a request of a kind it has a Dist for is answered no sooner than
// a latency drawn from that Dist after the proxy received its headers. The
// request is forwarded at once — the server acts on it, a PUT's object is
// stored — and only the answer is held, so the latency a client sees is
// max(draw, what the server behind took), the time an answer takes from
// a store that is slower than the one behind the proxy. A client that
// gives up while its answer is held gets no answer (the server has acted).
//
// A model is safe for concurrent use; its draws come from one generator,
// seeded (NewLatencyModel) so that a run can be repeated.
type LatencyModel struct {
	byKind map[Kind]Dist

	mu  sync.Mutex
	rng *rand.Rand
}

// The kinds the "put" and "get" names of ParseLatency stand for: a PUT of
// an object or of one part, and the Complete that makes a multipart
// object (each a PUT-class request that moves or commits the bytes), and
// a GET's first byte.
var (
	putKinds = []Kind{PutObject, UploadPart, CompleteMultipartUpload}
	getKinds = []Kind{GetObject}
)

// S3Like is the latency model of S3 Standard the benchmarks use (SPEC §13,
// "The S3 latency model"; DESIGN §Object storage): PutObject, UploadPart and
// CompleteMultipartUpload 80% 60–150 ms, 19% 150–300 ms, 1% 300–450 ms
// (p50 ≈ 116 ms, p90 ≈ 229 ms, p99 300 ms: SPEC §13's 200–400 ms p99 of a
// 2–8 MiB PUT); GetObject 15–40 ms to the first byte (SPEC §13: ~20 ms at
// p90). Every other request is forwarded as it comes.
const S3Like = "put=80:60-150,19:150-300,1:300-450;get=15-40"

// NewLatencyModel returns a model holding the answers of each kind in
// byKind by a draw of its Dist, with draws seeded by seed.
func NewLatencyModel(byKind map[Kind]Dist, seed uint64) (*LatencyModel, error) {
	for k, d := range byKind {
		if err := d.validate(); err != nil {
			return nil, fmt.Errorf("s3fault: latency of %s: %w", k, err)
		}
	}
	m := &LatencyModel{byKind: make(map[Kind]Dist, len(byKind)), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for k, d := range byKind {
		m.byKind[k] = slices.Clone(d)
	}
	return m, nil
}

func (d Dist) validate() error {
	if len(d) == 0 {
		return errors.New("no bands")
	}
	for _, b := range d {
		if b.Weight <= 0 || b.Min < 0 || b.Max < b.Min {
			return fmt.Errorf("band %v:%v-%v: want weight > 0 and 0 ≤ min ≤ max", b.Weight, b.Min, b.Max)
		}
	}
	return nil
}

// ParseLatency reads a latency model from s, seeding its draws with seed:
// "kinds=bands" pairs separated by ";". kinds is "put" (PutObject,
// UploadPart, CompleteMultipartUpload), "get" (GetObject) or a Kind's
// name (HeadObject, DeleteObject, …), several joined by "+"; bands is
// "min-max" for a single uniform band, or "weight:min-max" bands
// separated by ",", weights relative, times in milliseconds (fractions
// allowed). A later pair overrides an earlier one for the same kind.
// "" and "none" are the empty model: nothing held. S3Like is an example.
func ParseLatency(s string, seed uint64) (*LatencyModel, error) {
	byKind := make(map[Kind]Dist)
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return NewLatencyModel(byKind, seed)
	}
	for _, pair := range strings.Split(s, ";") {
		names, bands, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return nil, fmt.Errorf("s3fault: latency %q: want kinds=bands", pair)
		}
		d, err := parseDist(bands)
		if err != nil {
			return nil, fmt.Errorf("s3fault: latency %q: %w", pair, err)
		}
		for _, name := range strings.Split(names, "+") {
			kinds, err := kindsNamed(strings.TrimSpace(name))
			if err != nil {
				return nil, fmt.Errorf("s3fault: latency %q: %w", pair, err)
			}
			for _, k := range kinds {
				byKind[k] = d
			}
		}
	}
	return NewLatencyModel(byKind, seed)
}

func kindsNamed(name string) ([]Kind, error) {
	switch name {
	case "put":
		return putKinds, nil
	case "get":
		return getKinds, nil
	}
	for _, k := range []Kind{PutObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload,
		AbortMultipartUpload, GetObject, HeadObject, DeleteObject, ListObjects, ListMultipartUploads, Other} {
		if string(k) == name {
			return []Kind{k}, nil
		}
	}
	return nil, fmt.Errorf("unknown kind %q: want put, get or an S3 operation (PutObject, HeadObject, …)", name)
}

func parseDist(s string) (Dist, error) {
	var d Dist
	for _, band := range strings.Split(s, ",") {
		band = strings.TrimSpace(band)
		w, rng, weighted := strings.Cut(band, ":")
		b := Band{Weight: 1}
		if weighted {
			var err error
			if b.Weight, err = strconv.ParseFloat(w, 64); err != nil {
				return nil, fmt.Errorf("band %q: weight: %w", band, err)
			}
		} else {
			rng = band
		}
		lo, hi, ok := strings.Cut(rng, "-")
		if !ok {
			return nil, fmt.Errorf("band %q: want min-max in milliseconds", band)
		}
		var err error
		if b.Min, err = parseMs(lo); err != nil {
			return nil, fmt.Errorf("band %q: %w", band, err)
		}
		if b.Max, err = parseMs(hi); err != nil {
			return nil, fmt.Errorf("band %q: %w", band, err)
		}
		d = append(d, b)
	}
	return d, d.validate()
}

func parseMs(s string) (time.Duration, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q: want milliseconds ≥ 0", s)
	}
	return time.Duration(v * float64(time.Millisecond)), nil
}

// Dist returns the distribution of kind's answers, nil if they are not
// held.
func (m *LatencyModel) Dist(kind Kind) Dist {
	if m == nil {
		return nil
	}
	return m.byKind[kind]
}

// String writes m as ParseLatency reads it, kinds in a fixed order and
// the put and get groups by their names when all their kinds share a
// Dist.
func (m *LatencyModel) String() string {
	if m == nil || len(m.byKind) == 0 {
		return "none"
	}
	done := make(map[Kind]bool)
	var parts []string
	group := func(name string, kinds []Kind) {
		d, ok := m.byKind[kinds[0]]
		if !ok {
			return
		}
		for _, k := range kinds[1:] {
			if e, ok := m.byKind[k]; !ok || !slices.Equal(d, e) {
				return
			}
		}
		for _, k := range kinds {
			done[k] = true
		}
		parts = append(parts, name+"="+d.String())
	}
	group("put", putKinds)
	group("get", getKinds)
	keys := make([]string, 0, len(m.byKind))
	for k := range m.byKind {
		if !done[k] {
			keys = append(keys, string(k))
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+m.byKind[Kind(k)].String())
	}
	return strings.Join(parts, ";")
}

// draw returns the latency of one request of kind, 0 if not held.
func (m *LatencyModel) draw(kind Kind) time.Duration {
	if m == nil {
		return 0
	}
	d, ok := m.byKind[kind]
	if !ok {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return d.draw(m.rng)
}
