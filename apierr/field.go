package apierr

import (
	"errors"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Field errors. An InvalidArgument about one request field carries a
// google.rpc.BadRequest detail whose one field violation names the field
// by its proto name ("timeout_seconds", "lease_id", "metadata") and says
// what is wrong with it, so that a client can point at what its user gave
// (the CLI names the flag or the argument) without reading the message.
// A number outside its bounds also carries an ErrorInfo with reason
// OutOfRange and the bounds (the server's configured ones where they are
// configurable) in its metadata.

// OutOfRange: a number is outside the bounds the server accepts for its
// field. The metadata has KeyMin and KeyMax, both inclusive, in decimal;
// KeyMax is absent when there is no upper bound. The BadRequest detail
// names the field. Code InvalidArgument.
const OutOfRange = "OUT_OF_RANGE"

// Metadata keys of OutOfRange and WeightExceedsPermits.
const (
	KeyMin = "min"
	KeyMax = "max"
	// KeyPermits: the semaphore's permits (WeightExceedsPermits).
	KeyPermits = "permits"
)

// InvalidField is an InvalidArgument about field: the message is
// "field: desc", and a BadRequest detail names the field.
func InvalidField(field, desc string) error {
	return WithField(status.New(codes.InvalidArgument, field+": "+desc), field, desc).Err()
}

// FieldOutOfRange is InvalidField for a number outside min..max (both
// inclusive), with reason OutOfRange and the bounds in its metadata.
func FieldOutOfRange(field string, min, max int64, desc string) error {
	st := status.New(codes.InvalidArgument, field+": "+desc)
	st = WithMetadata(st, OutOfRange, RangeMetadata(min, max, true))
	return WithField(st, field, desc).Err()
}

// RangeMetadata is the ErrorInfo metadata of an OutOfRange error: min,
// and max when hasMax.
func RangeMetadata(min, max int64, hasMax bool) map[string]string {
	md := map[string]string{KeyMin: strconv.FormatInt(min, 10)}
	if hasMax {
		md[KeyMax] = strconv.FormatInt(max, 10)
	}
	return md
}

// WithMetadata returns st with an ErrorInfo of reason and md added (st is
// not changed); an st that already has one is returned as it is.
func WithMetadata(st *status.Status, reason string, md map[string]string) *status.Status {
	if info(st) != nil {
		return st
	}
	ei := &errdetails.ErrorInfo{Reason: reason, Domain: Domain}
	if len(md) > 0 {
		ei.Metadata = md
	}
	out, err := st.WithDetails(ei)
	if err != nil {
		return st
	}
	return out
}

// WithField returns st with a BadRequest detail naming field added (st is
// not changed). desc is what is wrong with the field; when empty, the
// message without its "field: " prefix.
func WithField(st *status.Status, field, desc string) *status.Status {
	if field == "" || badRequest(st) != nil {
		return st
	}
	if desc == "" {
		desc = strings.TrimPrefix(st.Message(), field+": ")
	}
	out, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
		{Field: field, Description: desc},
	}})
	if err != nil {
		return st
	}
	return out
}

func badRequest(st *status.Status) *errdetails.BadRequest {
	if st == nil {
		return nil
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br
		}
	}
	return nil
}

func statusOf(err error) *status.Status {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus()
	}
	return nil
}

// FieldOf returns the request field err's BadRequest detail names, and
// what is wrong with it ("", "" when err has none).
func FieldOf(err error) (field, desc string) {
	br := badRequest(statusOf(err))
	if br == nil {
		return "", ""
	}
	v := br.GetFieldViolations()[0]
	return v.GetField(), v.GetDescription()
}

// Bounds are an OutOfRange error's bounds, both inclusive.
type Bounds struct {
	Min    int64
	Max    int64
	HasMax bool // false: no upper bound
}

// BoundsOf returns the bounds of an OutOfRange error (ok false for any
// other error).
func BoundsOf(err error) (b Bounds, ok bool) {
	ei := Info(err)
	if ei.GetReason() != OutOfRange {
		return Bounds{}, false
	}
	md := ei.GetMetadata()
	min, err1 := strconv.ParseInt(md[KeyMin], 10, 64)
	if err1 != nil {
		return Bounds{}, false
	}
	b.Min = min
	if s, has := md[KeyMax]; has {
		max, err2 := strconv.ParseInt(s, 10, 64)
		if err2 != nil {
			return Bounds{}, false
		}
		b.Max, b.HasMax = max, true
	}
	return b, true
}
