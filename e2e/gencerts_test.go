package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// deploy/gen-certs.sh leaves every key, the CA keys above all, private to
// whoever ran it, and gives each node a directory with only its own keys
// and the CA certificates, handed to the container's uid when run as root.
func TestGenCertsKeepsCAKeysPrivate(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed (Debian package openssl)")
	}
	out := t.TempDir()
	cmd := exec.Command("bash", repoFile("deploy/gen-certs.sh"), out, "n1", "n2")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen-certs.sh: %v\n%s", err, b)
	}
	me := os.Getuid()
	for _, k := range []string{"api-ca.key", "peer-ca.key", "n1-api.key", "client.key"} {
		st, err := os.Stat(filepath.Join(out, k))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 || int(st.Sys().(*syscall.Stat_t).Uid) != me {
			t.Errorf("%s: mode %v owner %d, want 0600 owned by the caller (%d)", k, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Uid, me)
		}
	}
	for _, n := range []string{"n1", "n2"} {
		entries, err := os.ReadDir(filepath.Join(out, n))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
			st, _ := os.Stat(filepath.Join(out, n, e.Name()))
			owner := int(st.Sys().(*syscall.Stat_t).Uid)
			if me == 0 && owner != 65532 {
				t.Errorf("%s/%s: owner %d, want the container's uid 65532 (run as root)", n, e.Name(), owner)
			}
			if strings.HasSuffix(e.Name(), ".key") && st.Mode().Perm() != 0o600 {
				t.Errorf("%s/%s: mode %v, want 0600", n, e.Name(), st.Mode().Perm())
			}
		}
		sort.Strings(names)
		want := []string{"api-ca.crt", n + "-api.crt", n + "-api.key", n + "-peer.crt", n + "-peer.key", "peer-ca.crt"}
		sort.Strings(want)
		if strings.Join(names, " ") != strings.Join(want, " ") {
			t.Errorf("%s/ holds %v, want only %v", n, names, want)
		}
	}
}
