package rpc

import (
	"fmt"
	"unicode"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
)

// firstInvalid returns the first failed check as an InvalidArgument status.
// Every request is checked here, before it can reach Raft.
func firstInvalid(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return statusFromErr(e)
		}
	}
	return nil
}

func checkLimit(limit int32) error {
	_, err := fsm.ValidateLimit(limit)
	if err != nil {
		return statusFromErr(err)
	}
	return nil
}

func checkTimeout(field string, v, max int64) error {
	if v < 0 || v > max {
		return apierr.FieldOutOfRange(field, 0, max, fmt.Sprintf("must be 0..%d, got %d", max, v))
	}
	return nil
}

// checkPrintable refuses what docs/API.md's "printable" excludes beyond
// control characters: Unicode separators (U+2028, U+2029), format
// characters such as bidi overrides (U+202E) and zero-width spaces
// (U+200B), and every other rune unicode.IsPrint rejects. It is checked
// here, at the API, and not in the state machine, so that log entries
// written by older servers still apply the same.
func checkPrintable(field, v string) error {
	for i, r := range v {
		if r >= 0x80 && !unicode.IsPrint(r) {
			return apierr.InvalidField(field, fmt.Sprintf("must be printable, found %U at byte %d", r, i))
		}
	}
	return nil
}
