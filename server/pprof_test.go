package server_test

import (
	"net/http"
	"testing"

	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// Profiles are served only when asked for.
func TestPprofOnlyWhenEnabled(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := servertest.Start(t, 1, func(cfg *server.Config) {
			cfg.HTTPAddr = "127.0.0.1:0"
			cfg.Pprof = on
		})
		resp, err := http.Get("http://" + c.Nodes[0].HTTPAddr() + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on]; resp.StatusCode != want {
			t.Fatalf("pprof %v: status %d, want %d", on, resp.StatusCode, want)
		}
	}
}
