package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// With --acl, /status (members, their addresses, indexes) takes the rule
// of GetClusterStatus: open before the cluster is bootstrapped, then any
// valid token as "Authorization: Bearer <secret>" (the web view's way);
// no token or an unknown one is 401 with the reason.
func TestStatusPageUnderACL(t *testing.T) {
	c := servertest.New(t)
	cfg := servertest.Config(t, "node1")
	cfg.ACL, cfg.HTTPAddr = true, "127.0.0.1:0"
	s := c.StartNode(cfg)
	servertest.Eventually(t, "a leader", 20*time.Second, s.IsLeader)
	url := "http://" + s.HTTPAddr() + "/status"
	hc := &http.Client{Timeout: 10 * time.Second}
	get := func(secret string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body := map[string]any{}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("GET /status: %d, body not JSON: %v", resp.StatusCode, err)
		}
		return resp.StatusCode, body
	}
	if code, body := get(""); code != http.StatusOK || body["node_id"] != "node1" {
		t.Fatalf("before bootstrap: %d %v, want 200 (open, as GetClusterStatus)", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	boot, err := pb.NewACLServiceClient(c.Conn(0)).Bootstrap(ctx, &pb.BootstrapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(""); code != http.StatusUnauthorized || body["reason"] != "TOKEN_MISSING" || body["members"] != nil {
		t.Fatalf("no token: %d %v, want 401 TOKEN_MISSING", code, body)
	}
	if code, body := get("grk_not_a_token"); code != http.StatusUnauthorized || body["reason"] != "TOKEN_UNKNOWN" {
		t.Fatalf("unknown token: %d %v, want 401 TOKEN_UNKNOWN", code, body)
	}
	if code, body := get(boot.Secret); code != http.StatusOK || body["members"] == nil {
		t.Fatalf("admin token: %d %v, want 200 with the members", code, body)
	}
	// Any valid token, as GetClusterStatus: a read token on one namespace.
	rd, err := pb.NewACLServiceClient(c.Conn(0)).CreateToken(tokenCtx(ctx, boot.Secret), &pb.CreateTokenRequest{Role: "read", Namespace: "ns1"})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := get(rd.Secret); code != http.StatusOK {
		t.Fatalf("read token: %d, want 200", code)
	}
	if _, err := pb.NewACLServiceClient(c.Conn(0)).RevokeToken(tokenCtx(ctx, boot.Secret), &pb.RevokeTokenRequest{Id: rd.GetToken().GetId()}); err != nil {
		t.Fatal(err)
	}
	if code, body := get(rd.Secret); code != http.StatusUnauthorized || body["reason"] != "TOKEN_UNKNOWN" {
		t.Fatalf("revoked token: %d %v, want 401 TOKEN_UNKNOWN", code, body)
	}
}
