package fsm

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// forbiddenImports are the packages the state machine must not use
// directly: a clock, randomness or the network would make two nodes that
// apply the same log diverge. The leader puts time and ids into commands.
var forbiddenImports = []string{"time", "math/rand", "math/rand/v2", "crypto/rand", "net"}

// nondeterministicImports lists "file: import" for every non-test Go file
// in dir (whatever its build constraints) that imports a forbidden package
// or anything under net/.
func nondeterministicImports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	fset := token.NewFileSet()
	n := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		n++
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(forbiddenImports, p) || strings.HasPrefix(p, "net/") {
				bad = append(bad, filepath.Base(path)+": "+p)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no Go files in %s: the check would be vacuous", dir)
	}
	return bad
}

// The fsm package's own (non-test) files import no clock, no randomness
// and no network.
func TestNoNondeterministicImports(t *testing.T) {
	if bad := nondeterministicImports(t, "."); len(bad) > 0 {
		t.Fatalf("the state machine must be deterministic; forbidden imports:\n%s", strings.Join(bad, "\n"))
	}
}

// The check itself catches every forbidden import, in any file, whatever
// its build tags, and ignores test files.
func TestNondeterministicImportsCheckCatches(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ok.go", "package x\nimport (\n\t\"sort\"\n\t\"strings\"\n)\n")
	write("clock_test.go", "package x\nimport \"time\"\n")
	write("tagged.go", "//go:build never\n\npackage x\nimport \"crypto/rand\"\n")
	write("more.go", "package x\nimport (\n\t\"time\"\n\tr \"math/rand\"\n\t\"math/rand/v2\"\n\t\"net\"\n\t_ \"net/http\"\n)\n")
	got := nondeterministicImports(t, dir)
	want := []string{"more.go: time", "more.go: math/rand", "more.go: math/rand/v2", "more.go: net", "more.go: net/http", "tagged.go: crypto/rand"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
