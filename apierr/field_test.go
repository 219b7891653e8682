package apierr

import (
	"fmt"
	"math"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestFieldDetail(t *testing.T) {
	err := InvalidField("lease_id", `must be "ls_" followed by base62 characters`)
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != `lease_id: must be "ls_" followed by base62 characters` {
		t.Fatalf("status %v", err)
	}
	// Found through a client's wrapping too.
	for _, e := range []error{err, fmt.Errorf("grackle: acquire: %w", err)} {
		if f, d := FieldOf(e); f != "lease_id" || d != `must be "ls_" followed by base62 characters` {
			t.Fatalf("FieldOf(%v) = %q, %q", e, f, d)
		}
		if _, ok := BoundsOf(e); ok {
			t.Fatalf("BoundsOf(%v): bounds on a field error without them", e)
		}
	}
	if f, d := FieldOf(status.Error(codes.InvalidArgument, "x: bad")); f != "" || d != "" {
		t.Fatalf("FieldOf without a detail = %q, %q", f, d)
	}
	if f, _ := FieldOf(nil); f != "" {
		t.Fatal("FieldOf(nil)")
	}
	// A message that does not start with the field keeps it whole.
	st := WithField(status.New(codes.InvalidArgument, "version mismatch"), "expected_version", "")
	if f, d := FieldOf(st.Err()); f != "expected_version" || d != "version mismatch" {
		t.Fatalf("FieldOf = %q, %q", f, d)
	}
}

func TestFieldOutOfRange(t *testing.T) {
	err := FieldOutOfRange("timeout_seconds", 0, 300, "must be 0..300, got 600")
	b, ok := BoundsOf(fmt.Errorf("wrapped: %w", err))
	if !ok || b != (Bounds{Min: 0, Max: 300, HasMax: true}) {
		t.Fatalf("BoundsOf = %+v, %v", b, ok)
	}
	if f, _ := FieldOf(err); f != "timeout_seconds" || ReasonOf(err) != OutOfRange {
		t.Fatalf("field %q reason %q", f, ReasonOf(err))
	}
	// No upper bound: KeyMax absent.
	st := WithMetadata(status.New(codes.InvalidArgument, "weight: must be >= 1, got 0"), OutOfRange, RangeMetadata(1, math.MaxInt64, false))
	if b, ok := BoundsOf(st.Err()); !ok || b != (Bounds{Min: 1}) {
		t.Fatalf("BoundsOf = %+v, %v", b, ok)
	}
	// Another reason's metadata is no bounds.
	if _, ok := BoundsOf(New(codes.NotFound, LeaseNotFound, "n1", Leader{}, "gone")); ok {
		t.Fatal("bounds from LEASE_NOT_FOUND")
	}
}
