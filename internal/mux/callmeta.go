package mux

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// metadataKey is the key of the server's response header by which it says
// that it runs calls with metadata of their own (MuxCall.metadata). A
// client sends a call with metadata on the stream only to such a server:
// an older one would drop the field and run the call without it (without
// the caller's token, say), so the call goes as a unary call instead.
const metadataKey = "grackle-mux-metadata"

// maxCallMetadata bounds the entries of one call's metadata.
const maxCallMetadata = 32

// checkCallMetadata refuses metadata no unary call could carry: what the
// stream lets through must be what a unary call would have been allowed.
func checkCallMetadata(ps []*pb.MuxMetadata) error {
	if len(ps) > maxCallMetadata {
		return status.Errorf(codes.InvalidArgument, "metadata: %d entries; at most %d", len(ps), maxCallMetadata)
	}
	for i, p := range ps {
		if err := checkKey(p.Key); err != nil {
			return status.Errorf(codes.InvalidArgument, "metadata[%d].key: %q %s", i, p.Key, err)
		}
		if isBinaryKey(p.Key) {
			if len(p.Values) > 0 {
				return status.Errorf(codes.InvalidArgument, "metadata[%d].values: key %q is binary (\"-bin\"): its values go in binary_values", i, p.Key)
			}
			continue
		}
		if len(p.BinaryValues) > 0 {
			return status.Errorf(codes.InvalidArgument, "metadata[%d].binary_values: key %q is not binary (no \"-bin\"): its values go in values", i, p.Key)
		}
		for j, v := range p.Values {
			for k := 0; k < len(v); k++ {
				if v[k] < 0x20 || v[k] > 0x7e {
					return status.Errorf(codes.InvalidArgument, "metadata[%d].values[%d]: byte 0x%02x at %d; a text value holds printable ASCII (0x20..0x7e)", i, j, v[k], k)
				}
			}
		}
	}
	return nil
}

// checkKey says what is wrong with metadata key k, or nil.
func checkKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("is empty")
	case strings.HasPrefix(k, "grpc-"):
		return fmt.Errorf("is reserved by gRPC")
	case strings.HasPrefix(k, "grackle-mux-"):
		return fmt.Errorf("is the multiplexed stream's own")
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("has %q at %d; a key holds lower-case letters, digits, '-', '_' and '.'", c, i)
		}
	}
	return nil
}

// withCallMetadata returns ctx whose incoming metadata is the stream's
// (base) followed by ps, as a unary call's is its connection's followed by
// its own. base is never changed: metadata.Join copies.
func withCallMetadata(ctx context.Context, base metadata.MD, ps []*pb.MuxMetadata) context.Context {
	return metadata.NewIncomingContext(ctx, metadata.Join(base, fromPairs(ps)))
}

// carriesMetadata reports whether the server of a stream whose response
// header is h runs calls with metadata of their own.
func carriesMetadata(h metadata.MD) bool {
	v := h.Get(metadataKey)
	return len(v) > 0 && v[0] == "1"
}

// callPairs carries an outgoing call's metadata md as it is; a key
// package metadata did not lower (a literal MD) fails checkCallMetadata,
// and the call then goes as a unary call, where gRPC decides.
func callPairs(md metadata.MD) []*pb.MuxMetadata {
	out := make([]*pb.MuxMetadata, 0, len(md))
	for k, v := range md {
		if isBinaryKey(k) {
			out = append(out, binaryPair(k, v))
			continue
		}
		out = append(out, &pb.MuxMetadata{Key: k, Values: v})
	}
	return out
}
