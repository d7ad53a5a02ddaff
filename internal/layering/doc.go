// Package layering holds no code: its test checks the module's import graph
// against the rules DESIGN.md (§The pieces) states, with go list, so that a
// change that breaks them fails make test and make lint.
package layering
