package mux

import (
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/grackle-coord/grackle/internal/vtcodec"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// A result's metadata always encodes and comes back as it was: binary
// keys keep arbitrary bytes (a string field would refuse them, and the
// result, and the stream with it, would fail), text values that gRPC could
// not send either are dropped.
func TestMetadataRoundTrip(t *testing.T) {
	raw := string([]byte{0x08, 0xff, 0xfe, 0x00, 0x80})
	md := metadata.MD{
		"grpc-status-details-bin": {raw},
		"x-trace-bin":             {raw, "plain"},
		"grackle-index":           {"42"},
		"bad":                     {"ok", string([]byte{0xff})},
	}
	res := &pb.MuxResult{Id: 1, Trailer: toPairs(md)}
	b, err := vtcodec.Marshal(res)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var back pb.MuxResult
	if err := vtcodec.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	got := fromPairs(back.Trailer)
	for _, k := range []string{"grpc-status-details-bin", "x-trace-bin", "grackle-index"} {
		if len(got[k]) != len(md[k]) {
			t.Fatalf("%s: %q, want %q", k, got[k], md[k])
		}
		for i := range md[k] {
			if got[k][i] != md[k][i] {
				t.Errorf("%s[%d]: %q, want %q", k, i, got[k][i], md[k][i])
			}
		}
	}
	if v := got["bad"]; len(v) != 1 || v[0] != "ok" {
		t.Errorf("bad: %q, want only the valid value", v)
	}
}
