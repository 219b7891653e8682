package raftnode

import (
	"strings"
	"testing"

	"github.com/grackle-coord/grackle/internal/syncbuf"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func startNode(t *testing.T, bind, adv string) string {
	t.Helper()
	var buf syncbuf.Buffer
	n, err := New(Config{NodeID: "n1", DataDir: t.TempDir(), BindAddr: bind, AdvertiseAddr: adv, Bootstrap: true,
		FSM: &raft.MockFSM{}, Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})})
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	return buf.String()
}

// A Raft port beyond loopback without peer TLS is warned about at start; one
// on loopback is not.
func TestWarnsWhenRaftPortIsOpenWithoutPeerTLS(t *testing.T) {
	const warning = "listens beyond loopback without peer TLS"
	if l := startNode(t, "0.0.0.0:0", "127.0.0.1:7999"); !strings.Contains(l, warning) {
		t.Fatalf("no warning for 0.0.0.0 without peer TLS; log:\n%s", l)
	}
	if l := startNode(t, "127.0.0.1:0", ""); strings.Contains(l, warning) {
		t.Fatalf("warning on loopback; log:\n%s", l)
	}
}
