package admin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/backup"
	"github.com/grackle-coord/grackle/internal/peerconn"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/version"
)

// chunkSize is the data of one SaveSnapshotResponse.
const chunkSize = 256 << 10

// SaveSnapshot streams a snapshot file (package backup) of the state
// machine. On the leader: a barrier, so the FSM holds everything
// committed, then a Raft snapshot (its index and term are exact); when
// nothing was written since the last snapshot, that one is streamed. A
// follower relays the leader's stream.
func (s *Service) SaveSnapshot(_ *pb.SaveSnapshotRequest, stream grpc.ServerStreamingServer[pb.SaveSnapshotResponse]) error {
	ctx := stream.Context()
	if s.raft.State() != raft.Leader {
		return s.relaySnapshot(ctx, stream)
	}
	timeout := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if err := s.raft.Barrier(timeout).Error(); err != nil {
		return s.raftErr(err)
	}
	meta, rc, err := s.openSnapshot()
	if err != nil {
		return err
	}
	defer rc.Close()
	_, leader := s.raft.LeaderWithID()
	hdr := &pb.SnapshotFileHeader{Index: meta.Index, Term: meta.Term, CreatedAt: time.Now().UnixNano(),
		LeaderId: string(leader), Version: version.Get().Version, DataSize: uint64(meta.Size)}
	cw := &chunkWriter{stream: stream}
	w, err := backup.NewWriter(cw, hdr)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, rc); err != nil {
		return status.Errorf(codes.Unavailable, "snapshot: stream: %v", err)
	}
	if err := w.Close(); err != nil {
		return status.Errorf(codes.Internal, "snapshot: %v", err)
	}
	if err := cw.flush(); err != nil {
		return err
	}
	s.log.Info("snapshot streamed", "index", meta.Index, "term", meta.Term, "bytes", meta.Size)
	return nil
}

// openSnapshot takes a Raft user snapshot, or opens the latest stored one
// when nothing is new since it.
func (s *Service) openSnapshot() (*raft.SnapshotMeta, io.ReadCloser, error) {
	f := s.raft.Snapshot()
	if err := f.Error(); err == nil {
		return f.Open()
	} else if !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil, nil, s.raftErr(err)
	}
	list, err := s.snaps.List()
	if err != nil || len(list) == 0 {
		return nil, nil, status.Errorf(codes.Internal, "snapshot: nothing new since the last snapshot, and none stored: %v", err)
	}
	return s.snaps.Open(list[0].ID)
}

func (s *Service) raftErr(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return apierr.New(codes.Unavailable, apierr.NotLeader, s.cfg.NodeID, apierr.Leader{}, "snapshot: "+err.Error())
	}
	return status.Errorf(codes.Unavailable, "snapshot: %v", err)
}

// relaySnapshot forwards the call to the leader and relays its stream.
func (s *Service) relaySnapshot(ctx context.Context, stream grpc.ServerStreamingServer[pb.SaveSnapshotResponse]) error {
	if peerconn.Forwarded(ctx) {
		return apierr.New(codes.Unavailable, apierr.NotLeader, s.cfg.NodeID, apierr.Leader{}, "snapshot: not the leader")
	}
	_, id := s.raft.LeaderWithID()
	addr := s.grpcAddr(string(id))
	if id == "" || addr == "" {
		return apierr.New(codes.Unavailable, apierr.NotLeader, s.cfg.NodeID, apierr.Leader{}, "snapshot: no leader known")
	}
	c, err := s.cfg.Peers.Get(string(id), addr)
	if err != nil {
		return apierr.New(codes.Unavailable, apierr.NotSent, s.cfg.NodeID, apierr.Leader{ID: string(id), Address: addr}, "snapshot: "+err.Error())
	}
	out := peerconn.Forward(ctx) // the caller's token: the leader decides too
	l := apierr.Leader{ID: string(id), Address: addr}
	in, err := pb.NewClusterServiceClient(c).SaveSnapshot(out, &pb.SaveSnapshotRequest{})
	if err != nil {
		return apierr.Relayed(err, s.cfg.NodeID, l)
	}
	for {
		m, err := in.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return apierr.Relayed(err, s.cfg.NodeID, l)
		}
		if err := stream.Send(m); err != nil {
			return err
		}
	}
}

// chunkWriter turns writes into SaveSnapshotResponse messages.
type chunkWriter struct {
	stream grpc.ServerStreamingServer[pb.SaveSnapshotResponse]
	buf    bytes.Buffer
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	c.buf.Write(p)
	for c.buf.Len() >= chunkSize {
		if err := c.stream.Send(&pb.SaveSnapshotResponse{Data: c.buf.Next(chunkSize)}); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (c *chunkWriter) flush() error {
	if c.buf.Len() == 0 {
		return nil
	}
	return c.stream.Send(&pb.SaveSnapshotResponse{Data: c.buf.Next(c.buf.Len())})
}
