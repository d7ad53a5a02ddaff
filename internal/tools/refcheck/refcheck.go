// Command refcheck checks that every cross-reference in the repository's Go
// comments and Markdown files resolves to a heading inside the repository,
// so that a reader with only the clone can follow it. `make lint` runs it
// (`go run ./internal/tools/refcheck`); it prints one line per broken
// reference, as file:line, and exits 1 if there is any.
//
// What it checks:
//
//   - A document reference: a document name followed by a section sign and
//     a target. The name is SPEC, DESIGN or README (the Markdown file of
//     that name at the root), any other word in capitals (NAME.md at the
//     root, so a reference to a document the repository lacks is caught), a
//     path ending in .md (from the root, or from the referring file's
//     folder), or a Markdown link to one. The target is a section number
//     (SPEC §4, also in lists: SPEC §3–§5, §8) or the start of a heading's
//     title (DESIGN §Fetch, docs/format/wal-object.md §Keys), optionally
//     followed by "step N", which must be an item of that section's
//     numbered list (DESIGN §Fetch step 3).
//   - An invariant reference: "DESIGN invariant N" (or "invariants N and
//     M"), which must be an item of the numbered list under DESIGN.md's
//     Invariants heading.
//   - In Markdown, every relative link: the file must exist and a #anchor
//     must name one of its headings (GitHub's anchor rules).
//
// Go files are read through go/parser, so only comments count (a
// reference wraps across comment lines as it does in prose); in Markdown,
// fenced code blocks and inline code spans are skipped.
package main

import (
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	problems, n, err := Check(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "refcheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "refcheck: %d of %d references do not resolve inside the repository\n", len(problems), n)
		os.Exit(1)
	}
}

// Problem is one reference that does not resolve.
type Problem struct {
	File string // slash-separated, relative to the root
	Line int    // 1-based
	Ref  string // the reference as written, whitespace collapsed
	Why  string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %q: %s", p.File, p.Line, p.Ref, p.Why)
}

// Check walks root and returns the references that do not resolve, sorted
// by file and line, and how many references it checked. Directories whose
// names start with "." or are named testdata are skipped.
func Check(root string) ([]Problem, int, error) {
	c := &checker{root: root, docs: map[string]*doc{}}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasSuffix(name, ".go"):
			return c.goFile(rel)
		case strings.HasSuffix(name, ".md"):
			return c.mdFile(rel)
		}
		return nil
	})
	sort.Slice(c.problems, func(i, j int) bool {
		a, b := c.problems[i], c.problems[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
	return c.problems, c.refs, err
}

type checker struct {
	root     string
	docs     map[string]*doc // by slash path from the root; nil: no such file
	problems []Problem
	refs     int
}

// text is prose to scan: s, with the file line of each byte.
type text struct {
	file  string
	b     strings.Builder
	s     string // b's contents, once done
	lines []int  // lines[i] is the line of s[i]
}

func (t *text) add(s string, line int) {
	for i := 0; i < len(s); i++ {
		t.lines = append(t.lines, line)
		if s[i] == '\n' {
			line++
		}
	}
	t.b.WriteString(s)
}

func (c *checker) goFile(rel string) error {
	src, err := os.ReadFile(filepath.Join(c.root, rel))
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	for _, g := range f.Comments {
		t := &text{file: rel}
		for _, cm := range g.List {
			line := fset.Position(cm.Slash).Line
			body := cm.Text
			if strings.HasPrefix(body, "//") {
				body = body[2:]
			} else {
				body = strings.TrimSuffix(strings.TrimPrefix(body, "/*"), "*/")
			}
			t.add(body+"\n", line)
		}
		c.scan(t)
	}
	return nil
}

var (
	fenceRE      = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpanRE   = regexp.MustCompile("`[^`\n]*`")
	mdLinkRE     = regexp.MustCompile(`\[[^\]\n]*\]\(([^)\s]+)\)`)
	schemeLinkRE = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
)

func (c *checker) mdFile(rel string) error {
	d, err := c.doc(rel)
	if err != nil {
		return err
	}
	t := &text{file: rel}
	inFence := false
	for i, line := range d.lines {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			t.add("\n", i+1)
			continue
		}
		if inFence {
			t.add("\n", i+1)
			continue
		}
		// Blank out code spans, keeping the length so columns stay put.
		line = codeSpanRE.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat(" ", len(s)) })
		t.add(line+"\n", i+1)
	}
	c.scan(t)
	for _, m := range mdLinkRE.FindAllStringSubmatchIndex(t.s, -1) {
		target := t.s[m[2]:m[3]]
		if schemeLinkRE.MatchString(target) {
			continue
		}
		c.refs++
		path, anchor, _ := strings.Cut(target, "#")
		file := rel
		if path != "" {
			file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(rel), path)))
			if _, err := os.Stat(filepath.Join(c.root, file)); err != nil {
				c.report(t, m[0], t.s[m[0]:m[1]], "no file "+file+" in the repository")
				continue
			}
		}
		if anchor == "" {
			continue
		}
		if !strings.HasSuffix(file, ".md") {
			continue
		}
		td, err := c.doc(file)
		if err != nil {
			return err
		}
		if !td.hasAnchor(anchor) {
			c.report(t, m[0], t.s[m[0]:m[1]], file+" has no heading with anchor #"+anchor)
		}
	}
	return nil
}

var (
	// docRefRE finds a document name and the section sign after it.
	docRefRE = regexp.MustCompile(`(\[[^\]\n]*\]\(([^)\s#]+\.md)\)|([\w./-]+\.md)\b|\b([A-Z][A-Z0-9_]{2,})\b)\s*§`)
	// numRE is a numbered target; listRE one more number of a list.
	numRE  = regexp.MustCompile(`^(\d+(?:\.\d+)*)`)
	listRE = regexp.MustCompile(`^\s*(?:,|–|—|-|and|or|&)\s*§(\d+(?:\.\d+)*)`)
	stepRE = regexp.MustCompile(`^,?\s+step\s+(\d+)\b`)
	// invRE is an invariant reference.
	invRE    = regexp.MustCompile(`\bDESIGN\s+invariants?\s+(\d+(?:\s*(?:,|and|&)\s*\d+)*)`)
	invNumRE = regexp.MustCompile(`\d+`)
)

func (c *checker) scan(t *text) {
	t.s = t.b.String()
	for _, m := range docRefRE.FindAllStringSubmatchIndex(t.s, -1) {
		var file, name string
		switch {
		case m[4] >= 0: // Markdown link
			name = t.s[m[4]:m[5]]
			file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(t.file), name)))
		case m[6] >= 0: // path
			name = t.s[m[6]:m[7]]
			file = filepath.ToSlash(filepath.Clean(name))
			if c.exists(file) != nil {
				if f := filepath.ToSlash(filepath.Join(filepath.Dir(t.file), name)); c.exists(f) == nil {
					file = f
				}
			}
		default:
			name = t.s[m[8]:m[9]]
			file = name + ".md"
		}
		c.target(t, m[0], m[1], name, file)
	}
	for _, m := range invRE.FindAllStringSubmatchIndex(t.s, -1) {
		d, err := c.doc("DESIGN.md")
		for _, n := range invNumRE.FindAllString(t.s[m[2]:m[3]], -1) {
			c.refs++
			ref := "DESIGN invariant " + n
			switch {
			case err != nil:
				c.report(t, m[0], ref, "DESIGN.md is not in the repository")
			case d.heading("Invariants") < 0:
				c.report(t, m[0], ref, "DESIGN.md has no Invariants heading")
			case !d.hasItem(d.heading("Invariants"), n):
				c.report(t, m[0], ref, "DESIGN.md §Invariants has no item "+n)
			}
		}
	}
}

// target resolves the section after the section sign at t.s[end-1].
func (c *checker) target(t *text, start, end int, name, file string) {
	// The target may wrap across lines: compare it with one space for
	// each run of white space.
	rest := strings.Join(strings.Fields(t.s[end:min(len(t.s), end+400)]), " ")
	if r, _ := utf8.DecodeRuneInString(t.s[end:]); unicode.IsSpace(r) {
		rest = " " + rest // "§ x" names nothing
	}
	d, err := c.doc(file)
	if err != nil {
		c.refs++
		c.report(t, start, t.s[start:end]+clip(rest), file+" is not in the repository")
		return
	}
	if m := numRE.FindStringSubmatch(rest); m != nil {
		nums := []string{m[1]}
		after := rest[len(m[0]):]
		for {
			l := listRE.FindStringSubmatch(after)
			if l == nil {
				break
			}
			nums = append(nums, l[1])
			after = after[len(l[0]):]
		}
		for _, n := range nums {
			c.refs++
			if d.numbered(n) < 0 {
				c.report(t, start, name+" §"+n, file+" has no section numbered "+n)
			}
		}
		return
	}
	c.refs++
	h, n := d.titled(rest)
	if h < 0 {
		c.report(t, start, name+" §"+clip(rest), file+" has no heading that this names")
		return
	}
	if s := stepRE.FindStringSubmatch(rest[n:]); s != nil && !d.hasItem(h, s[1]) {
		c.report(t, start, name+" §"+rest[:n]+" step "+s[1], fmt.Sprintf("%s §%s has no step %s", file, d.headings[h].title, s[1]))
	}
}

func (c *checker) report(t *text, at int, ref, why string) {
	c.problems = append(c.problems, Problem{File: t.file, Line: t.lines[at], Ref: strings.Join(strings.Fields(ref), " "), Why: why})
}

// clip returns the first words of s, up to one that ends a phrase, for a
// message.
func clip(s string) string {
	f := strings.Fields(s)
	for i, w := range f {
		if i == 3 || strings.ContainsAny(w, ".,;:)") {
			f = f[:i+1]
			break
		}
	}
	return strings.Join(f, " ")
}

func (c *checker) exists(file string) error {
	_, err := os.Stat(filepath.Join(c.root, file))
	return err
}

// doc returns the parsed Markdown file at slash path file.
func (c *checker) doc(file string) (*doc, error) {
	if d, ok := c.docs[file]; ok {
		if d == nil {
			return nil, fs.ErrNotExist
		}
		return d, nil
	}
	src, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(file)))
	if err != nil {
		c.docs[file] = nil
		return nil, err
	}
	d := parseDoc(string(src))
	c.docs[file] = d
	return d, nil
}

// doc is a Markdown file's lines and headings.
type doc struct {
	lines    []string
	headings []heading
}

type heading struct {
	line  int    // index into lines
	level int    // number of #
	num   string // "4" for "## 4. Fetch", else ""
	title string // "Fetch"
	slug  string // GitHub's anchor of the whole heading
}

var (
	headingRE = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	headNumRE = regexp.MustCompile(`^§?(\d+(?:\.\d+)*)\.?\s+(.*)$`)
	itemRE    = regexp.MustCompile(`^\s*(?:\|\s*)?(\d+)\.\s`)
)

func parseDoc(src string) *doc {
	d := &doc{lines: strings.Split(src, "\n")}
	inFence := false
	for i, l := range d.lines {
		if fenceRE.MatchString(l) {
			inFence = !inFence
			continue
		}
		m := headingRE.FindStringSubmatch(l)
		if inFence || m == nil {
			continue
		}
		title := strings.NewReplacer("`", "", "*", "").Replace(m[2])
		h := heading{line: i, level: len(m[1]), title: title, slug: slug(m[2])}
		if n := headNumRE.FindStringSubmatch(title); n != nil {
			h.num, h.title = n[1], n[2]
		}
		d.headings = append(d.headings, h)
	}
	return d
}

// slug is GitHub's anchor for a heading: lower case, punctuation other than
// hyphens and underscores dropped, spaces as hyphens.
func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func (d *doc) hasAnchor(a string) bool {
	seen := map[string]int{}
	for _, h := range d.headings {
		s := h.slug
		if n := seen[h.slug]; n > 0 {
			s += "-" + strconv.Itoa(n)
		}
		seen[h.slug]++
		if s == a {
			return true
		}
	}
	return false
}

func (d *doc) numbered(n string) int {
	for i, h := range d.headings {
		if h.num == n {
			return i
		}
	}
	return -1
}

func (d *doc) heading(title string) int {
	for i, h := range d.headings {
		if strings.EqualFold(h.title, title) {
			return i
		}
	}
	return -1
}

// titled returns the heading whose title (or number and title) is the
// longest prefix of ref ending at a word boundary, and that prefix's length.
func (d *doc) titled(ref string) (int, int) {
	best, bestLen := -1, 0
	for i, h := range d.headings {
		for _, t := range []string{h.title, strings.TrimSpace(h.num + ". " + h.title)} {
			if len(t) <= bestLen || len(ref) < len(t) || !strings.EqualFold(ref[:len(t)], t) {
				continue
			}
			if r, _ := utf8.DecodeRuneInString(ref[len(t):]); len(ref) > len(t) && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
				continue
			}
			best, bestLen = i, len(t)
		}
	}
	return best, bestLen
}

// hasItem reports whether heading h's section (up to the next heading of
// the same or a higher level) has a numbered list item or table row n.
func (d *doc) hasItem(h int, n string) bool {
	end := len(d.lines)
	for _, o := range d.headings[h+1:] {
		if o.level <= d.headings[h].level {
			end = o.line
			break
		}
	}
	for _, l := range d.lines[d.headings[h].line+1 : end] {
		if m := itemRE.FindStringSubmatch(l); m != nil && m[1] == n {
			return true
		}
	}
	return false
}
