// Package acl is the sidecar's authorizer: Kafka's access control entries
// (SPEC §14, ACLs; KIP-11, KIP-290), the filters CreateAcls, DescribeAcls
// and DeleteAcls use, and the decision StandardAuthorizer makes for one
// principal, host, operation and resource. It does no IO: the entries come
// from a Source (the coordinators' shard 0, records 117), read on every
// decision.
package acl

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterName is the name of the one CLUSTER resource (Kafka's
// "kafka-cluster").
const ClusterName = "kafka-cluster"

// Wildcard is the resource name, principal name and host that match every
// resource of a type, every principal of a type, every host.
const Wildcard = "*"

// WildcardPrincipal is the principal of every user (`User:*`).
const WildcardPrincipal = "User:*"

// MaxString is the longest ResourceName, Principal or Host an entry may
// have, bytes (Kafka's string length; docs/format/metadata-records.md
// §Limits).
const MaxString = 32767

// Binding is one access control entry: a resource pattern (type, name,
// LITERAL or PREFIXED) and who (principal `User:name`, host) may or may
// not (Permission ALLOW or DENY) do what (Operation) to it. Its fields
// are the entry: two equal Bindings are the same entry.
type Binding struct {
	ResourceType kmsg.ACLResourceType
	ResourceName string
	PatternType  kmsg.ACLResourcePatternType
	Principal    string
	Host         string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Compare orders bindings by their fields in declaration order (strings by
// bytes): the order of DescribeAcls's answers and of the snapshot.
func Compare(a, b Binding) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		strings.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType),
		strings.Compare(a.Principal, b.Principal),
		strings.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// Refusal returns why b cannot be stored, in Kafka's words (the broker's
// and the controller's checks of a CreateAcls creation, answered
// INVALID_REQUEST), or "".
func (b Binding) Refusal() string {
	switch {
	case b.ResourceType < kmsg.ACLResourceTypeTopic || b.ResourceType > kmsg.ACLResourceTypeUser:
		return fmt.Sprintf("Invalid resourceType %s", name(b.ResourceType))
	case b.PatternType != kmsg.ACLResourcePatternTypeLiteral && b.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Sprintf("Invalid patternType %s", name(b.PatternType))
	case b.Operation < kmsg.ACLOperationAll || b.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Sprintf("Invalid operation %s", name(b.Operation))
	case b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny:
		return fmt.Sprintf("Invalid permissionType %s", name(b.Permission))
	case b.ResourceType == kmsg.ACLResourceTypeCluster && b.ResourceName != ClusterName:
		return fmt.Sprintf("The only valid name for the CLUSTER resource is %s", ClusterName)
	case b.ResourceName == "":
		return "Invalid empty resource name"
	case !strings.Contains(b.Principal, ":"):
		return fmt.Sprintf("Could not parse principal from `%s` (no colon is present separating the principal type from the principal name)", b.Principal)
	case len(b.ResourceName) > MaxString || len(b.Principal) > MaxString || len(b.Host) > MaxString:
		return fmt.Sprintf("A resource name, principal or host is longer than %d bytes", MaxString)
	}
	return ""
}

// name is a code's name as Kafka prints it (kmsg's names are Kafka's,
// UNKNOWN for a code it does not know).
func name(v fmt.Stringer) string { return v.String() }

// Filter selects bindings (DescribeAcls, DeleteAcls): ResourceType ANY,
// PatternType ANY, Operation ANY, Permission ANY and a nil string match
// every value. PatternType MATCH with a ResourceName selects the bindings
// that apply to that resource: LITERAL ones of the name or of `*`, and
// PREFIXED ones whose name begins it.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Refusal returns why f cannot select, in Kafka's words (a code Kafka
// reads as UNKNOWN: INVALID_REQUEST), or "".
func (f Filter) Refusal() string {
	switch {
	case f.ResourceType < kmsg.ACLResourceTypeAny || f.ResourceType > kmsg.ACLResourceTypeUser,
		f.PatternType < kmsg.ACLResourcePatternTypeAny || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return "Unknown patternFilter."
	case f.Operation < kmsg.ACLOperationAny || f.Operation > kmsg.ACLOperationDescribeTokens,
		f.Permission < kmsg.ACLPermissionTypeAny || f.Permission > kmsg.ACLPermissionTypeAllow:
		return "Unknown entryFilter."
	}
	return ""
}

// Matches reports whether f selects b (Kafka's AclBindingFilter.matches).
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != kmsg.ACLResourcePatternTypeAny && f.PatternType != kmsg.ACLResourcePatternTypeMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		n := *f.ResourceName
		switch {
		case f.PatternType != kmsg.ACLResourcePatternTypeMatch:
			if n != b.ResourceName {
				return false
			}
		case b.PatternType == kmsg.ACLResourcePatternTypeLiteral:
			if n != b.ResourceName && b.ResourceName != Wildcard {
				return false
			}
		default: // PREFIXED
			if !strings.HasPrefix(n, b.ResourceName) {
				return false
			}
		}
	}
	return (f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == b.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission)
}
