package rpc

import (
	"testing"
	"unicode"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/fsm"
)

// checkProcessID is the API's whole check of a process_id.
func checkProcessID(v string) error {
	return firstInvalid(fsm.ValidateProcessID("process_id", v), checkPrintable("process_id", v))
}

// Every rune of the categories "printable" excludes (line and paragraph
// separators Zl and Zp, format characters Cf such as bidi overrides and
// zero-width spaces, controls Cc) is refused inside a process_id, naming
// the field; letters, marks, digits, punctuation, symbols and the ASCII
// space are not.
func TestProcessIDRefusesEveryNonPrintableCategory(t *testing.T) {
	for name, tab := range map[string]*unicode.RangeTable{"Zl": unicode.Zl, "Zp": unicode.Zp, "Cf": unicode.Cf, "Cc": unicode.Cc} {
		n := 0
		for _, r16 := range tab.R16 {
			for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
				n++
				wantRefused(t, name, r)
			}
		}
		for _, r32 := range tab.R32 {
			for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
				n++
				wantRefused(t, name, r)
			}
		}
		if n == 0 {
			t.Fatalf("category %s has no runes", name)
		}
	}
	for _, ok := range []string{"host-1/pid 42", "é", "日本語", "a\u0301", "☃", "x_y.z:1"} {
		if err := checkProcessID(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

func wantRefused(t *testing.T, cat string, r rune) {
	t.Helper()
	err := checkProcessID("host" + string(r) + "pid")
	if status.Code(err) != codes.InvalidArgument || len(status.Convert(err).Message()) < 11 || status.Convert(err).Message()[:11] != "process_id:" {
		t.Errorf("%s rune %U: %v, want InvalidArgument naming process_id", cat, r, err)
	}
}
