// Command importgraph prints the imports between this module's packages
// (tests aside), one line per package that imports another, and keeps the
// copy in DESIGN.md true: `make lint` runs it with -check DESIGN.md, which
// fails when the code block after the marker line differs from what
// `go list` reports; -w DESIGN.md rewrites that block.
//
// The marker is an HTML comment line starting with "<!-- importgraph";
// the block is the fenced code block that follows it.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	check := flag.String("check", "", "Markdown file whose import graph block must equal the generated one")
	write := flag.String("w", "", "Markdown file whose import graph block to rewrite")
	flag.Parse()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		fail(fmt.Errorf("go list: %w", err))
	}
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		fail(fmt.Errorf("go list -m: %w", err))
	}
	graph := Format(Parse(string(out), strings.TrimSpace(string(mod))))
	switch {
	case *check != "":
		src, err := os.ReadFile(*check)
		if err != nil {
			fail(err)
		}
		_, got, _, err := Block(string(src))
		if err != nil {
			fail(fmt.Errorf("%s: %w", *check, err))
		}
		if got != graph {
			fmt.Fprintf(os.Stderr, "importgraph: the import graph in %s is not the real one; run: go run ./internal/tools/importgraph -w %s\n--- %s\n%s--- go list\n%s", *check, *check, *check, got, graph)
			os.Exit(1)
		}
	case *write != "":
		src, err := os.ReadFile(*write)
		if err != nil {
			fail(err)
		}
		before, _, after, err := Block(string(src))
		if err != nil {
			fail(fmt.Errorf("%s: %w", *write, err))
		}
		if err := os.WriteFile(*write, []byte(before+graph+after), 0o644); err != nil {
			fail(err)
		}
	default:
		fmt.Print(graph)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "importgraph:", err)
	os.Exit(2)
}

// Parse reads `go list -f '{{.ImportPath}} {{join .Imports " "}}'` output
// and returns, per package of module mod (path relative to the module),
// the module's packages it imports, relative too.
func Parse(list, mod string) map[string][]string {
	g := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(list))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		pkg, ok := rel(f[0], mod)
		if !ok {
			continue
		}
		var deps []string
		for _, imp := range f[1:] {
			if d, ok := rel(imp, mod); ok {
				deps = append(deps, d)
			}
		}
		g[pkg] = deps
	}
	return g
}

func rel(path, mod string) (string, bool) {
	if path == mod {
		return ".", true
	}
	r, ok := strings.CutPrefix(path, mod+"/")
	return r, ok
}

// Format writes g as aligned lines "pkg → dep, dep", sorted, for the
// packages that import at least one other (a package's imports under one
// folder written folder/{a, b}), then one line naming the packages that
// import none.
func Format(g map[string][]string) string {
	var pkgs, leaves []string
	width := 0
	for p, deps := range g {
		if len(deps) > 0 {
			pkgs = append(pkgs, p)
			width = max(width, len(p))
		} else {
			leaves = append(leaves, p)
		}
	}
	sort.Strings(pkgs)
	sort.Strings(leaves)
	var b bytes.Buffer
	for _, p := range pkgs {
		fmt.Fprintf(&b, "%-*s → %s\n", width, p, strings.Join(group(g[p]), ", "))
	}
	if len(leaves) > 0 {
		fmt.Fprintf(&b, "(import none: %s)\n", strings.Join(leaves, ", "))
	}
	return b.String()
}

// group sorts deps and folds the ones that share a parent folder with
// another into parent/{a, b}.
func group(deps []string) []string {
	deps = append([]string(nil), deps...)
	sort.Strings(deps)
	byDir := map[string][]string{}
	for _, d := range deps {
		if i := strings.LastIndex(d, "/"); i > 0 {
			byDir[d[:i]] = append(byDir[d[:i]], d[i+1:])
		}
	}
	var out []string
	done := map[string]bool{}
	for _, d := range deps {
		i := strings.LastIndex(d, "/")
		if i <= 0 || len(byDir[d[:i]]) < 2 {
			out = append(out, d)
			continue
		}
		if dir := d[:i]; !done[dir] {
			done[dir] = true
			out = append(out, dir+"/{"+strings.Join(byDir[dir], ", ")+"}")
		}
	}
	return out
}

// Block splits a Markdown document around the import graph: the text up to
// and including the opening fence after the marker line, the block's
// contents, and the rest from the closing fence on.
func Block(doc string) (before, block, after string, err error) {
	i := strings.Index(doc, "\n<!-- importgraph")
	if i < 0 {
		return "", "", "", errors.New("no <!-- importgraph marker line")
	}
	open := strings.Index(doc[i+1:], "\n```")
	if open < 0 {
		return "", "", "", errors.New("no code block after the importgraph marker")
	}
	start := i + 1 + open + 1
	nl := strings.IndexByte(doc[start:], '\n')
	if nl < 0 {
		return "", "", "", errors.New("unterminated code block after the importgraph marker")
	}
	start += nl + 1
	end := strings.Index(doc[start:], "```")
	if end < 0 {
		return "", "", "", errors.New("unterminated code block after the importgraph marker")
	}
	return doc[:start], doc[start : start+end], doc[start+end:], nil
}
