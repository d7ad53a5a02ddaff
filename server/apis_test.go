package server

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestApiVersionsAgreesWithDispatcher checks that the advertised table and
// the dispatcher agree: every advertised key has a route and every route is
// advertised; the table holds the server's own ranges and the delegates'
// as declared; every advertised version is one kmsg can encode and is
// answered over TCP with a response of that key and version; the version
// just outside the range closes the connection.
func TestApiVersionsAgreesWithDispatcher(t *testing.T) {
	ts := startServer(t, nil)
	for key := int16(0); key < 200; key++ {
		_, routed := routeFor(key)
		_, _, advertised := ts.versionRange(key)
		if routed != advertised && !(routed && slices.Contains(txnKeys, key)) {
			t.Errorf("key %d (%s): routed %v, advertised %v", key, nameForKey(key), routed, advertised)
		}
	}
	// The test server has no transaction coordinator: its APIs are routed
	// but not advertised (withoutTxns).
	declared := withoutTxns(slices.Concat(ownAPIs, rpcVersions, ts.prod.APIVersions(), ts.fetch.APIVersions()), true)
	for _, d := range declared {
		lo, hi, ok := ts.versionRange(d.ApiKey)
		if !ok || lo != d.MinVersion || hi != d.MaxVersion {
			t.Errorf("%s: advertised %d–%d (%v), declared %d–%d", nameForKey(d.ApiKey), lo, hi, ok, d.MinVersion, d.MaxVersion)
		}
	}
	if len(ts.apis) != len(declared) {
		t.Errorf("%d keys advertised, %d declared", len(ts.apis), len(declared))
	}
	for i, a := range ts.apis {
		if i > 0 && ts.apis[i-1].ApiKey >= a.ApiKey {
			t.Errorf("ApiVersions table not sorted by key at %d", a.ApiKey)
		}
		if a.MinVersion > a.MaxVersion || a.MaxVersion > requestForKey(a.ApiKey).MaxVersion() {
			t.Errorf("%s: range %d–%d outside kmsg's 0–%d", nameForKey(a.ApiKey),
				a.MinVersion, a.MaxVersion, requestForKey(a.ApiKey).MaxVersion())
		}
	}

	c := dialRaw(t, ts.Addr())
	for _, a := range testAPIs() {
		for v := a.MinVersion; v <= a.MaxVersion; v++ {
			req := requestForKey(a.ApiKey)
			req.SetVersion(v)
			if p, ok := req.(*kmsg.ProduceRequest); ok {
				p.Acks = -1
			}
			resp := c.roundTrip(req)
			if resp.Key() != a.ApiKey || resp.GetVersion() != v {
				t.Errorf("%s v%d answered with %s v%d", nameForKey(a.ApiKey), v, nameForKey(resp.Key()), resp.GetVersion())
			}
		}
	}

	for _, a := range testAPIs() {
		if a.ApiKey == apiVersionsKey {
			continue // tested in TestApiVersionsUnknownVersion
		}
		for _, v := range []int16{a.MinVersion - 1, a.MaxVersion + 1} {
			if v < 0 || v > requestForKey(a.ApiKey).MaxVersion() {
				continue
			}
			c := dialRaw(t, ts.Addr())
			req := requestForKey(a.ApiKey)
			req.SetVersion(v)
			c.send(req)
			c.expectClosed()
		}
	}
	checkServing(t, ts.Addr())
}

// TestApiVersionsUnknownVersion checks the KIP-511 answer to an ApiVersions
// request of a version the server does not know: header v0, a v0 body with
// UNSUPPORTED_VERSION listing ApiVersions' own range, and the connection
// stays open.
func TestApiVersionsUnknownVersion(t *testing.T) {
	ts := startServer(t, nil)
	hi := apiVersionsVersions.MaxVersion
	want := []byte{
		0, 35, // error code UNSUPPORTED_VERSION
		0, 0, 0, 1, // one api key
		0, 18, 0, 0, byte(hi >> 8), byte(hi), // ApiVersions 0–hi
	}
	for _, tc := range []struct {
		name  string
		frame func(corr int32) []byte
	}{
		{"v5 from kmsg", func(corr int32) []byte {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version = 5
			req.ClientSoftwareName, req.ClientSoftwareVersion = "x", "1"
			return kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)
		}},
		{"v300 with a garbage body", func(corr int32) []byte {
			body := []byte{0, 18, 1, 44, 0, 0, 0, 0, 0xff, 0xfe, 1, 2, 3}
			binary.BigEndian.PutUint32(body[4:], uint32(corr))
			return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
		}},
		{"negative version", func(corr int32) []byte {
			body := []byte{0, 18, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff}
			binary.BigEndian.PutUint32(body[4:], uint32(corr))
			return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, ts.Addr())
			c.write(tc.frame(42))
			frame, err := c.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			if corr := int32(binary.BigEndian.Uint32(frame)); corr != 42 {
				t.Fatalf("correlation id %d, want 42", corr)
			}
			if !bytes.Equal(frame[4:], want) {
				t.Fatalf("body % x, want % x", frame[4:], want)
			}
			// The client retries at the advertised max on the same connection.
			resp := c.roundTrip(apiVersionsReq()).(*kmsg.ApiVersionsResponse)
			if resp.ErrorCode != 0 {
				t.Fatalf("retry: %v", kerr.ErrorForCode(resp.ErrorCode))
			}
		})
	}
}

// TestApiVersionsResponseHeaderV0 checks that a flexible ApiVersions request
// gets a response header without the tagged-field byte (SPEC §6), while
// other flexible requests get one.
func TestApiVersionsResponseHeaderV0(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr())
	corr := c.send(apiVersionsReq())
	frame, err := c.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(frame[4:]); err != nil {
		t.Fatalf("body right after the correlation id does not decode: %v", err)
	}
	if len(resp.ApiKeys) != len(testAPIs()) {
		t.Fatalf("%d api keys, want %d", len(resp.ApiKeys), len(testAPIs()))
	}
	for i, k := range resp.ApiKeys {
		w := testAPIs()[i]
		if k.ApiKey != w.ApiKey || k.MinVersion != w.MinVersion || k.MaxVersion != w.MaxVersion {
			t.Errorf("api key %d: got %+v, want %+v", i, k, w)
		}
	}

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	c.roundTrip(md) // recv checks the tag byte of header v1
}

// TestBuildAPIsRefusesBadDeclarations: New refuses delegates whose
// declared versions do not fit what they answer.
func TestBuildAPIsRefusesBadDeclarations(t *testing.T) {
	prod := (&fakeProducer{}).APIVersions()
	fetch := (&fakeFetcher{}).APIVersions()
	key := func(k, lo, hi int16) kmsg.ApiVersionsResponseApiKey {
		return kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: lo, MaxVersion: hi}
	}
	for _, tc := range []struct {
		name        string
		prod, fetch []kmsg.ApiVersionsResponseApiKey
		want        string
	}{
		{"producer declares no key", nil, fetch, "Producer declares versions of API keys []"},
		{"producer declares Fetch", []kmsg.ApiVersionsResponseApiKey{key(0, 0, 13), key(1, 4, 16)}, fetch, "Producer declares"},
		{"fetcher misses OffsetForLeaderEpoch", prod, fetch[:2], "Fetcher declares"},
		{"fetcher declares a key twice", prod, append(slices.Clone(fetch[:2]), key(2, 1, 8)), "Fetcher declares"},
		{"empty range", []kmsg.ApiVersionsResponseApiKey{key(0, 5, 4)}, fetch, "not a range"},
		{"past kmsg", prod, []kmsg.ApiVersionsResponseApiKey{key(1, 4, 999), fetch[1], fetch[2]}, "not a range"},
		{"negative", prod, []kmsg.ApiVersionsResponseApiKey{key(1, -1, 16), fetch[1], fetch[2]}, "not a range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildAPIs(tc.prod, tc.fetch)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("buildAPIs = %v; want an error containing %q", err, tc.want)
			}
			if _, err := New(Config{Addr: "127.0.0.1:0", ClusterID: "c"}, &declaring{fakeProducer: &fakeProducer{}, apis: tc.prod},
				&declaringFetcher{fakeFetcher: &fakeFetcher{}, apis: tc.fetch}, newFakeCatalog()); err == nil {
				t.Fatal("New accepted the declarations")
			}
		})
	}
	if _, err := buildAPIs(prod, fetch); err != nil {
		t.Fatalf("the fakes' declarations: %v", err)
	}
}

// declaring and declaringFetcher are the fakes with other declared versions.
type declaring struct {
	*fakeProducer
	apis []kmsg.ApiVersionsResponseApiKey
}

func (d *declaring) APIVersions() []kmsg.ApiVersionsResponseApiKey { return d.apis }

type declaringFetcher struct {
	*fakeFetcher
	apis []kmsg.ApiVersionsResponseApiKey
}

func (d *declaringFetcher) APIVersions() []kmsg.ApiVersionsResponseApiKey { return d.apis }

// TestApiVersionsClientSoftware checks KIP-511's client software name and
// version from ApiVersions v3: outside the pattern, INVALID_REQUEST with no
// API keys, and the connection still serves the next request; below v3
// the fields are not sent and nothing is checked. e2e pins the same cases
// against Kafka 4.4.
func TestApiVersionsClientSoftware(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr())
	for _, tc := range []struct {
		name, version string
		ok            bool
	}{
		{"kgo", "1.18.0", true},
		{"a", "1", true},
		{"a-b.c", "v1.0-rc.1", true},
		{"bad name!", "1.0", false},
		{"", "1.0", false},
		{"ok", "", false},
		{"-lead", "1", false},
		{"trail.", "1", false},
		{"a..b", "1", true},
		{"under_score", "1", false},
		{"ok", "1.0 beta", false},
		{"ünicode", "1", false},
	} {
		req := apiVersionsReq()
		req.ClientSoftwareName, req.ClientSoftwareVersion = tc.name, tc.version
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if ok := resp.ErrorCode == 0; ok != tc.ok || (resp.ErrorCode != 0 && resp.ErrorCode != kerr.InvalidRequest.Code) {
			t.Errorf("%q %q: %v, want ok=%v", tc.name, tc.version, kerr.ErrorForCode(resp.ErrorCode), tc.ok)
		}
		if tc.ok == (len(resp.ApiKeys) == 0) {
			t.Errorf("%q %q: %d api keys", tc.name, tc.version, len(resp.ApiKeys))
		}
	}
	old := apiVersionsReq()
	old.Version = 2
	old.ClientSoftwareName = "bad name!"
	if resp := c.roundTrip(old).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Errorf("v2: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
