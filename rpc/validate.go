package rpc

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/fsm"
)

// firstInvalid returns the first failed check as an InvalidArgument status.
// Every request is checked here, before it can reach Raft.
func firstInvalid(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return statusFromErr(e)
		}
	}
	return nil
}

func checkLimit(limit int32) error {
	_, err := fsm.ValidateLimit(limit)
	if err != nil {
		return statusFromErr(err)
	}
	return nil
}

func checkTimeout(field string, v, max int64) error {
	if v < 0 || v > max {
		return status.Errorf(codes.InvalidArgument, "%s: must be 0..%d, got %d", field, max, v)
	}
	return nil
}
