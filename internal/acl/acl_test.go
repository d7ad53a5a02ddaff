package acl

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func b(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

const (
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	cluster = kmsg.ACLResourceTypeCluster
	lit     = kmsg.ACLResourcePatternTypeLiteral
	pre     = kmsg.ACLResourcePatternTypePrefixed
	allow   = kmsg.ACLPermissionTypeAllow
	deny    = kmsg.ACLPermissionTypeDeny
)

// TestAuthorize pins the decisions of SPEC §14, ACLs: DENY wins, the
// implied DESCRIBE and DESCRIBE_CONFIGS (never implied by a DENY),
// wildcards of name, principal and host, prefixes, super users and a
// resource without ACLs.
func TestAuthorize(t *testing.T) {
	acls := []Binding{
		b(topic, "orders", lit, "User:alice", "*", kmsg.ACLOperationRead, allow),
		b(topic, "orders", lit, "User:alice", "10.0.0.9", kmsg.ACLOperationAll, deny),
		b(topic, "logs-", pre, "User:*", "*", kmsg.ACLOperationWrite, allow),
		b(topic, "logs-secret", lit, "User:bob", "*", kmsg.ACLOperationWrite, deny),
		b(topic, "*", lit, "User:carol", "*", kmsg.ACLOperationAlterConfigs, allow),
		b(topic, "audit", lit, "User:dave", "*", kmsg.ACLOperationRead, deny),
		b(group, "g", lit, "User:alice", "127.0.0.1", kmsg.ACLOperationRead, allow),
		b(cluster, ClusterName, lit, "User:ops", "*", kmsg.ACLOperationAll, allow),
	}
	a := New(Config{SuperUsers: []string{"User:admin"}}, func() []Binding { return acls })
	open := New(Config{AllowIfNoACL: true}, func() []Binding { return acls })
	for _, c := range []struct {
		name      string
		a         *Authorizer
		principal string
		host      string
		op        kmsg.ACLOperation
		rt        kmsg.ACLResourceType
		res       string
		want      bool
	}{
		{"allowed", a, "User:alice", "127.0.0.1", kmsg.ACLOperationRead, topic, "orders", true},
		{"READ implies DESCRIBE", a, "User:alice", "127.0.0.1", kmsg.ACLOperationDescribe, topic, "orders", true},
		{"READ is not WRITE", a, "User:alice", "127.0.0.1", kmsg.ACLOperationWrite, topic, "orders", false},
		{"DENY ALL from a host wins", a, "User:alice", "10.0.0.9", kmsg.ACLOperationRead, topic, "orders", false},
		{"another principal", a, "User:bob", "127.0.0.1", kmsg.ACLOperationRead, topic, "orders", false},
		{"prefix and User:*", a, "User:bob", "1.2.3.4", kmsg.ACLOperationWrite, topic, "logs-app", true},
		{"prefix is not a suffix", a, "User:bob", "1.2.3.4", kmsg.ACLOperationWrite, topic, "app-logs-", false},
		{"literal DENY within an allowed prefix", a, "User:bob", "1.2.3.4", kmsg.ACLOperationWrite, topic, "logs-secret", false},
		{"ALTER_CONFIGS on * implies DESCRIBE_CONFIGS", a, "User:carol", "1.2.3.4", kmsg.ACLOperationDescribeConfigs, topic, "anything", true},
		{"ALTER_CONFIGS does not imply DESCRIBE", a, "User:carol", "1.2.3.4", kmsg.ACLOperationDescribe, topic, "anything", false},
		{"DESCRIBE where only a DENY of READ names the resource", open, "User:dave", "1.2.3.4", kmsg.ACLOperationDescribe, topic, "audit", false},
		{"group by host", a, "User:alice", "127.0.0.1", kmsg.ACLOperationRead, group, "g", true},
		{"group from another host", a, "User:alice", "127.0.0.2", kmsg.ACLOperationRead, group, "g", false},
		{"cluster ALL", a, "User:ops", "1.2.3.4", kmsg.ACLOperationAlter, cluster, ClusterName, true},
		{"super user", a, "User:admin", "1.2.3.4", kmsg.ACLOperationDelete, topic, "orders", true},
		{"no ACL of the resource", a, "User:alice", "1.2.3.4", kmsg.ACLOperationRead, group, "other", false},
		{"no ACL, allow.everyone.if.no.acl.found", open, "User:ANONYMOUS", "1.2.3.4", kmsg.ACLOperationRead, group, "other", true},
		{"ACLs of others, allow.everyone.if.no.acl.found", open, "User:ANONYMOUS", "1.2.3.4", kmsg.ACLOperationRead, topic, "orders", false},
	} {
		if got := c.a.Authorize(Request{Principal: c.principal, Host: c.host}, c.op, c.rt, c.res); got != c.want {
			t.Errorf("%s: %s from %s %s %s %q = %v, want %v", c.name, c.principal, c.host, c.op, c.rt, c.res, got, c.want)
		}
	}
}

// TestAuthorizeByResourceType: WRITE on some topic (InitProducerId
// without a transactional id).
func TestAuthorizeByResourceType(t *testing.T) {
	for _, c := range []struct {
		name string
		acls []Binding
		want bool
	}{
		{"none", nil, false},
		{"a literal", []Binding{b(topic, "t", lit, "User:a", "*", kmsg.ACLOperationWrite, allow)}, true},
		{"READ only", []Binding{b(topic, "t", lit, "User:a", "*", kmsg.ACLOperationRead, allow)}, false},
		{"denied by the same literal", []Binding{b(topic, "t", lit, "User:a", "*", kmsg.ACLOperationWrite, allow),
			b(topic, "t", lit, "User:a", "*", kmsg.ACLOperationWrite, deny)}, false},
		{"denied by a prefix", []Binding{b(topic, "tx", lit, "User:a", "*", kmsg.ACLOperationWrite, allow),
			b(topic, "t", pre, "User:a", "*", kmsg.ACLOperationAll, deny)}, false},
		{"a prefix outside the denied one", []Binding{b(topic, "u", pre, "User:a", "*", kmsg.ACLOperationWrite, allow),
			b(topic, "t", pre, "User:a", "*", kmsg.ACLOperationWrite, deny)}, true},
		{"denied by *", []Binding{b(topic, "u", lit, "User:a", "*", kmsg.ACLOperationWrite, allow),
			b(topic, "*", lit, "User:*", "*", kmsg.ACLOperationWrite, deny)}, false},
	} {
		a := New(Config{}, func() []Binding { return c.acls })
		if got := a.AuthorizeByResourceType(Request{Principal: "User:a", Host: "h"}, kmsg.ACLOperationWrite, topic); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestFilterMatches pins Kafka's AclBindingFilter.matches.
func TestFilterMatches(t *testing.T) {
	x := b(topic, "logs-", pre, "User:a", "*", kmsg.ACLOperationWrite, allow)
	y := b(topic, "*", lit, "User:a", "*", kmsg.ACLOperationRead, allow)
	str := func(s string) *string { return &s }
	anyF := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	for _, c := range []struct {
		name string
		f    func(Filter) Filter
		x, y bool
	}{
		{"everything", func(f Filter) Filter { return f }, true, true},
		{"MATCH a name", func(f Filter) Filter {
			f.PatternType, f.ResourceName = kmsg.ACLResourcePatternTypeMatch, str("logs-app")
			return f
		}, true, true},
		{"ANY compares names", func(f Filter) Filter { f.ResourceName = str("logs-app"); return f }, false, false},
		{"LITERAL *", func(f Filter) Filter { f.PatternType, f.ResourceName = lit, str("*"); return f }, false, true},
		{"operation", func(f Filter) Filter { f.Operation = kmsg.ACLOperationWrite; return f }, true, false},
		{"principal", func(f Filter) Filter { f.Principal = str("User:b"); return f }, false, false},
		{"group", func(f Filter) Filter { f.ResourceType = group; return f }, false, false},
	} {
		f := c.f(anyF)
		if f.Matches(x) != c.x || f.Matches(y) != c.y {
			t.Errorf("%s: matches %v %v, want %v %v", c.name, f.Matches(x), f.Matches(y), c.x, c.y)
		}
	}
}

// BenchmarkAuthorize is one decision over n entries (each of another
// topic, the last one allowing): the cost a produce pays per topic with
// an authorizer, which scans every entry.
func BenchmarkAuthorize(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			acls := make([]Binding, n)
			for i := range acls {
				acls[i] = Binding{ResourceType: topic, ResourceName: fmt.Sprintf("t%05d", i), PatternType: lit,
					Principal: "User:a", Host: "*", Operation: kmsg.ACLOperationWrite, Permission: allow}
			}
			a := New(Config{}, func() []Binding { return acls })
			r := Request{Principal: "User:a", Host: "10.0.0.1"}
			name := acls[n-1].ResourceName
			b.ReportAllocs()
			for b.Loop() {
				if !a.Authorize(r, kmsg.ACLOperationWrite, topic, name) {
					b.Fatal("denied")
				}
			}
		})
	}
}

// TestAuthorizeSearchesAsItScans: with more entries of a type than
// scanBelow Authorize searches the sorted entries; its decisions are
// those of a scan of every entry, for random entries over a few names,
// prefixes, principals, hosts and operations.
func TestAuthorizeSearchesAsItScans(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	names := []string{"*", "a", "ab", "abc", "abd", "b", "ba", "*a"}
	ops := []kmsg.ACLOperation{kmsg.ACLOperationAll, kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe}
	for round := range 50 {
		var acls []Binding
		for range scanBelow + rng.IntN(60) {
			pt := lit
			if rng.IntN(3) == 0 {
				pt = pre
			}
			perm := allow
			if rng.IntN(4) == 0 {
				perm = deny
			}
			rt := topic
			if rng.IntN(5) == 0 {
				rt = group
			}
			x := b(rt, pick(names...), pt, pick("User:a", "User:b", "User:*"), pick("*", "h1"), ops[rng.IntN(len(ops))], perm)
			if i, held := slices.BinarySearchFunc(acls, x, Compare); !held {
				acls = slices.Insert(acls, i, x)
			}
		}
		for _, open := range []bool{false, true} {
			a := New(Config{AllowIfNoACL: open}, func() []Binding { return acls })
			for _, name := range append(names, "abcd", "c", "", "a*") {
				for _, op := range ops[1:] {
					for _, r := range []Request{{"User:a", "h1"}, {"User:b", "h2"}, {"User:c", "h1"}} {
						if got, want := a.Authorize(r, op, topic, name), scanAuthorize(a, r, op, topic, name); got != want {
							t.Fatalf("round %d, %d entries: %v %s %q = %v, a scan says %v", round, len(acls), r, op, name, got, want)
						}
					}
				}
			}
		}
	}
}

// scanAuthorize is Authorize as a scan of every entry, without super
// users.
func scanAuthorize(a *Authorizer, r Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	found, allowed := false, false
	for _, b := range a.source() {
		if b.ResourceType != rt || !patternApplies(b, name) {
			continue
		}
		found = true
		switch result(b, r, op) {
		case kmsg.ACLPermissionTypeDeny:
			return false
		case kmsg.ACLPermissionTypeAllow:
			allowed = true
		}
	}
	if !found {
		return a.cfg.AllowIfNoACL
	}
	return allowed
}
