package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the binary Binary built, so test runs leave nothing
// behind in the temporary folder.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
