// Package flowwindow fixes the HTTP/2 flow-control windows of Grackle's
// gRPC connections, on the node and in its clients.
//
// With its default settings gRPC probes the bandwidth-delay product of
// every connection: the first DATA frame read after the previous probe
// was answered sends a PING, and the peer answers it. On a connection with
// one call in flight at a time (a worker process with its own connection,
// the ordinary shape of a fleet) that is nearly a PING and its answer per
// call, each a system call at both ends. A window given explicitly turns
// the probing off. The windows only bound what a peer may send ahead of
// what was read; nothing is allocated for them.
package flowwindow

import "google.golang.org/grpc"

// Size is the window of each stream and of each connection: far above any
// one request or response (a few KiB), enough for a snapshot stream on a
// LAN.
const Size = 1 << 20

// ServerOptions fix the windows of a gRPC server's connections.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InitialWindowSize(Size), grpc.InitialConnWindowSize(Size)}
}

// DialOptions fix the windows of a client connection.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(Size), grpc.WithInitialConnWindowSize(Size)}
}
