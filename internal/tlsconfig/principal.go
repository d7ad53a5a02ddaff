package tlsconfig

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// SubjectName returns cert's subject distinguished name in RFC 2253 form,
// the most specific attribute first ("CN=client,OU=eng,O=example"), as
// Kafka's default principal builder reads it (SPEC §14, Principals):
// attributes in the certificate's own order, reversed; types Go knows by
// name (CN, O, OU, C, L, ST, STREET, POSTALCODE, SERIALNUMBER) by name,
// others as a dotted OID.
func SubjectName(cert *x509.Certificate) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) != 0 {
		return cert.Subject.String()
	}
	return rdns.String()
}

// PrincipalMapper maps a distinguished name to a principal's name by
// ssl.principal.mapping.rules (SPEC §14, Principals).
type PrincipalMapper struct {
	rules []mappingRule
}

// mappingRule is DEFAULT (re nil: the name unchanged) or
// RULE:pattern/replacement/[LU].
type mappingRule struct {
	re          *regexp.Regexp
	replacement string
	lower       bool
	upper       bool
}

// ParsePrincipalMappingRules parses ssl.principal.mapping.rules: rules
// separated by commas, each DEFAULT or RULE:pattern/replacement/ with an
// optional L (lower case) or U (upper case) after the last slash; a slash
// or comma inside a pattern or replacement is escaped with a backslash.
// "" is DEFAULT. Patterns are Go regular expressions (RE2), which is
// Java's syntax for the patterns such rules use.
func ParsePrincipalMappingRules(s string) (*PrincipalMapper, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = "DEFAULT"
	}
	var m PrincipalMapper
	for s != "" {
		var r mappingRule
		switch {
		case strings.HasPrefix(s, "DEFAULT"):
			s = s[len("DEFAULT"):]
		case strings.HasPrefix(s, "RULE:"):
			rest := s[len("RULE:"):]
			pattern, rest, ok1 := cutUnescaped(rest, '/')
			replacement, rest, ok2 := cutUnescaped(rest, '/')
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule %q: want RULE:pattern/replacement/[LU]", s)
			}
			if rest != "" && (rest[0] == 'L' || rest[0] == 'U') {
				r.lower, r.upper = rest[0] == 'L', rest[0] == 'U'
				rest = rest[1:]
			}
			re, err := regexp.Compile("^(?:" + unescapeSlash(pattern) + ")$")
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: rule %q: %w", s, err)
			}
			r.re, r.replacement = re, goReplacement(unescapeSlash(replacement), re.NumSubexp())
			s = rest
		default:
			return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule %q: want DEFAULT or RULE:pattern/replacement/[LU]", s)
		}
		m.rules = append(m.rules, r)
		s = strings.TrimLeft(s, " \t\n")
		switch {
		case s == "":
		case s[0] == ',':
			s = strings.TrimLeft(s[1:], " \t\n")
		default:
			return nil, fmt.Errorf("ssl.principal.mapping.rules: unexpected %q after a rule", s)
		}
	}
	if len(m.rules) == 0 {
		m.rules = []mappingRule{{}}
	}
	return &m, nil
}

// ErrNoMatchingRule: no rule applies to a distinguished name; the
// connection is refused.
var ErrNoMatchingRule = errors.New("no ssl.principal.mapping.rules rule applies")

// Name maps dn by the first rule whose pattern matches all of it.
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if r.re == nil {
			return dn, nil
		}
		if !r.re.MatchString(dn) {
			continue
		}
		out := r.re.ReplaceAllString(dn, r.replacement)
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w: %q", ErrNoMatchingRule, dn)
}

// Principal is the listener's certificate-to-principal function:
// "User:" and the mapped subject name.
func (m *PrincipalMapper) Principal(cert *x509.Certificate) (string, error) {
	n, err := m.Name(SubjectName(cert))
	if err != nil {
		return "", err
	}
	return "User:" + n, nil
}

// cutUnescaped cuts s at the first sep not preceded by a backslash.
func cutUnescaped(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// unescapeSlash turns "\/" back into "/" (other escapes are the regular
// expression's own).
func unescapeSlash(s string) string { return strings.ReplaceAll(s, `\/`, "/") }

// goReplacement rewrites a Java replacement for Go's ReplaceAllString:
// $n becomes ${n} (Go would read "$1x" as the group named "1x"); a
// reference past the groups takes fewer digits, and one to no group at
// all stays a literal "$n", as Kafka's rules do.
func goReplacement(s string, groups int) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			i++
			if s[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(s[i])
			}
			continue
		}
		if c != '$' {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		digits := s[i+1 : j]
		if digits == "" {
			b.WriteString("$$")
			continue
		}
		n := 0
		for k := len(digits); k > 0; k-- {
			n = atoi(digits[:k])
			if n <= groups {
				b.WriteString("${" + digits[:k] + "}" + digits[k:])
				break
			}
			if k == 1 {
				b.WriteString("$$" + digits)
			}
		}
		i = j - 1
	}
	return b.String()
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
		if n > 1<<20 {
			return n
		}
	}
	return n
}
