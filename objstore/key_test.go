package objstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/diskless-sidecar/sidecar/objstore"
)

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name string
		key  string
		ok   bool
	}{
		{"simple", "wal/0123abcd", true},
		{"one segment", "x", true},
		{"deep", "a/b/c/d", true},
		{"dots inside segments", "a/..b/c..", true},
		{"hidden segment", "a/.hidden", true},
		{"unicode", "p/ü", true},
		{"max length", strings.Repeat("k", objstore.MaxKeyBytes), true},
		{"empty", "", false},
		{"absolute", "/a", false},
		{"trailing slash", "a/", false},
		{"double slash", "a//b", false},
		{"dot", ".", false},
		{"dot segment", "a/./b", false},
		{"dotdot", "..", false},
		{"dotdot escape", "../a", false},
		{"dotdot inside", "a/../b", false},
		{"dotdot last", "a/..", false},
		{"backslash", `a\b`, false},
		{"nul", "a\x00b", false},
		{"newline", "a\nb", false},
		{"del", "a\x7fb", false},
		{"invalid utf-8", "a\xffb", false},
		{"too long", strings.Repeat("k", objstore.MaxKeyBytes+1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := objstore.ValidateKey(tt.key)
			if tt.ok && err != nil {
				t.Fatalf("ValidateKey(%q) = %v, want nil", tt.key, err)
			}
			if !tt.ok && !errors.Is(err, objstore.ErrInvalidKey) {
				t.Fatalf("ValidateKey(%q) = %v, want ErrInvalidKey", tt.key, err)
			}
		})
	}
}
