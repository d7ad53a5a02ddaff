package acl

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// StandardAuthorizerClass is the value of `authorizer.class.name` that
// enables the authorizer: Kafka's KRaft authorizer, whose behaviour this
// package follows (SPEC §14, ACLs).
const StandardAuthorizerClass = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// Source returns the bindings held now, sorted by Compare. The slice is
// shared: it is never changed (a change of the entries makes a new one).
type Source func() []Binding

// Config configures an Authorizer.
type Config struct {
	// SuperUsers are the principals allowed everything whatever the
	// entries say (`super.users`, principals separated by semicolons,
	// e.g. "User:admin;User:ops"); default none.
	SuperUsers []string
	// AllowIfNoACL allows an operation on a resource no entry names (of
	// any principal or operation) (`allow.everyone.if.no.acl.found`);
	// default false: only super users may.
	AllowIfNoACL bool
}

// ParseSuperUsers reads `super.users`: principals separated by
// semicolons, each `<type>:<name>`; spaces around them are dropped.
func ParseSuperUsers(s string) ([]string, error) {
	var out []string
	for p := range strings.SplitSeq(s, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if i := strings.IndexByte(p, ':'); i <= 0 || i == len(p)-1 {
			return nil, fmt.Errorf("super.users: %q is not a principal of the form User:<name>", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// Authorizer decides whether a principal connected from a host may do an
// operation on a resource, as Kafka's StandardAuthorizer decides (SPEC
// §14, ACLs). Safe for concurrent use.
type Authorizer struct {
	cfg    Config
	source Source
}

// New returns an authorizer over the entries source returns.
func New(cfg Config, source Source) *Authorizer {
	return &Authorizer{cfg: cfg, source: source}
}

// Request is who asks: the connection's principal (`User:name`) and the
// client's IP address (no port, no leading slash).
type Request struct {
	Principal string
	Host      string
}

// SuperUser reports whether r's principal is a super user.
func (a *Authorizer) SuperUser(r Request) bool {
	return slices.Contains(a.cfg.SuperUsers, r.Principal)
}

// Authorize reports whether r may do op on the resource of type rt named
// name (ClusterName for the cluster). A super user may do everything;
// otherwise a DENY entry that applies wins, then an ALLOW entry that
// applies allows (one of READ, WRITE, DELETE, ALTER allowing DESCRIBE too,
// ALTER_CONFIGS allowing DESCRIBE_CONFIGS; ALL every operation), and a
// resource no entry names is AllowIfNoACL's. An entry applies to the
// resource when it is LITERAL of its name or of `*`, or PREFIXED of a
// beginning of its name; to the principal when it names it or `User:*`;
// to the host when it names it or `*`.
func (a *Authorizer) Authorize(r Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if a.SuperUser(r) {
		return true
	}
	found, allowed, denied := false, false, false
	applicable(a.source(), rt, name, func(b Binding) bool {
		if !patternApplies(b, name) {
			return true
		}
		found = true
		switch result(b, r, op) {
		case kmsg.ACLPermissionTypeDeny:
			denied = true
			return false
		case kmsg.ACLPermissionTypeAllow:
			allowed = true
		}
		return true
	})
	switch {
	case denied:
		return false
	case !found:
		return a.cfg.AllowIfNoACL
	}
	return allowed
}

// scanBelow is the number of entries of a resource type under which
// applicable scans them rather than search (BenchmarkAuthorize: a binary
// search per prefix of the name costs more than a scan of a few entries).
const scanBelow = 16

// applicable calls yield with every entry of bs (sorted by Compare) of
// type rt whose pattern may apply to name — its own name's, `*`'s and
// those of each beginning of it — and perhaps others of rt (yield checks
// patternApplies; it may see an entry twice), until yield returns false.
// Below scanBelow entries (of rt) it scans them; above, a decision costs
// O(len(name)·log n), not a scan of every entry (Kafka's
// StandardAuthorizer also searches its sorted entries).
func applicable(bs []Binding, rt kmsg.ACLResourceType, name string, yield func(Binding) bool) {
	if len(bs) < scanBelow {
		for _, b := range bs {
			if b.ResourceType == rt && !yield(b) {
				return
			}
		}
		return
	}
	lo := sort.Search(len(bs), func(i int) bool { return bs[i].ResourceType >= rt })
	hi := sort.Search(len(bs), func(i int) bool { return bs[i].ResourceType > rt })
	of := bs[lo:hi]
	each := func(run []Binding) bool {
		for _, b := range run {
			if !yield(b) {
				return false
			}
		}
		return true
	}
	if len(of) < scanBelow {
		each(of)
		return
	}
	named := func(n string) []Binding {
		i, _ := slices.BinarySearchFunc(of, n, func(b Binding, n string) int { return strings.Compare(b.ResourceName, n) })
		j := i
		for j < len(of) && of[j].ResourceName == n {
			j++
		}
		return of[i:j]
	}
	if !each(named(name)) || !each(named(Wildcard)) {
		return
	}
	for k := 1; k < len(name); k++ {
		if !each(named(name[:k])) {
			return
		}
	}
}

// AuthorizeByResourceType reports whether r may do op on at least one
// resource of type rt (Kafka's Authorizer.authorizeByResourceType, which
// InitProducerId without a transactional id asks of WRITE on topics): a
// super user, or r allowed op on a resource named "hardcode" (none
// names it: AllowIfNoACL), may; otherwise an ALLOW entry of r for op must
// exist that no DENY entry of r for op covers — a DENY of `*` covers every
// one, a LITERAL one the same name, a PREFIXED one every name it begins.
func (a *Authorizer) AuthorizeByResourceType(r Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if a.Authorize(r, op, rt, "hardcode") {
		return true
	}
	var allowLit, allowPre, denyLit, denyPre []string
	for _, b := range a.source() {
		if b.ResourceType != rt || !principalHostApply(b, r) || (b.Operation != op && b.Operation != kmsg.ACLOperationAll) {
			continue
		}
		lit := b.PatternType == kmsg.ACLResourcePatternTypeLiteral
		switch {
		case b.Permission == kmsg.ACLPermissionTypeDeny && lit:
			denyLit = append(denyLit, b.ResourceName)
		case b.Permission == kmsg.ACLPermissionTypeDeny:
			denyPre = append(denyPre, b.ResourceName)
		case lit:
			allowLit = append(allowLit, b.ResourceName)
		default:
			allowPre = append(allowPre, b.ResourceName)
		}
	}
	if slices.Contains(denyLit, Wildcard) {
		return false
	}
	if slices.Contains(allowLit, Wildcard) {
		return true
	}
	prefixDenied := func(n string) bool {
		return slices.ContainsFunc(denyPre, func(p string) bool { return strings.HasPrefix(n, p) })
	}
	for _, n := range allowLit {
		if !slices.Contains(denyLit, n) && !prefixDenied(n) {
			return true
		}
	}
	for _, n := range allowPre {
		if !prefixDenied(n) {
			return true
		}
	}
	return false
}

// patternApplies reports whether b's resource pattern covers name.
func patternApplies(b Binding, name string) bool {
	if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, b.ResourceName)
	}
	return b.ResourceName == name || b.ResourceName == Wildcard
}

func principalHostApply(b Binding, r Request) bool {
	if b.Principal != r.Principal && (b.Principal != WildcardPrincipal || !strings.HasPrefix(r.Principal, "User:")) {
		return false
	}
	return b.Host == Wildcard || b.Host == r.Host
}

// result is what b says of r doing op: ALLOW, DENY, or UNKNOWN when b does
// not apply to r or op. An ALLOW of READ, WRITE, DELETE or ALTER allows
// DESCRIBE, one of ALTER_CONFIGS DESCRIBE_CONFIGS; a DENY denies its own
// operation only (ALL: every one).
func result(b Binding, r Request, op kmsg.ACLOperation) kmsg.ACLPermissionType {
	if !principalHostApply(b, r) {
		return kmsg.ACLPermissionTypeUnknown
	}
	if b.Operation != kmsg.ACLOperationAll && b.Operation != op {
		implied := b.Permission == kmsg.ACLPermissionTypeAllow && (op == kmsg.ACLOperationDescribe && impliesDescribe(b.Operation) ||
			op == kmsg.ACLOperationDescribeConfigs && b.Operation == kmsg.ACLOperationAlterConfigs)
		if !implied {
			return kmsg.ACLPermissionTypeUnknown
		}
	}
	return b.Permission
}

func impliesDescribe(op kmsg.ACLOperation) bool {
	switch op {
	case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
		return true
	}
	return false
}
