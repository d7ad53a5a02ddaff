package objstore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyBytes is the longest key accepted, in bytes: S3's limit.
const MaxKeyBytes = 1024

// ValidateKey reports whether key is usable by every backend: 1 to
// MaxKeyBytes bytes of valid UTF-8, without control characters or
// backslashes, made of "/"-separated segments that are neither empty (no
// leading, trailing or doubled "/") nor "." or "..". These rules keep a key
// inside a Dir's root on any OS and make it mean the same object on S3.
// The error wraps ErrInvalidKey and says which rule was broken.
func ValidateKey(key string) error {
	if reason := keyProblem(key); reason != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, reason)
	}
	return nil
}

func keyProblem(key string) string {
	switch {
	case key == "":
		return "empty"
	case len(key) > MaxKeyBytes:
		return fmt.Sprintf("longer than %d bytes", MaxKeyBytes)
	case !utf8.ValidString(key):
		return "not valid UTF-8"
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return "contains a control character"
		}
		if r == '\\' {
			return `contains "\"`
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return "has an empty path segment"
		case ".", "..":
			return `has a "." or ".." path segment`
		}
	}
	return ""
}
