package fsm

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Code classifies an FSM error. Each code maps onto exactly one gRPC status
// code (see rpc.statusFromFSM); the FSM itself does not import gRPC.
type Code int

const (
	CodeInvalidArgument Code = iota + 1
	CodeNotFound
	CodeAlreadyExists
	CodeFailedPrecondition
	CodeResourceExhausted
	// CodeInternal marks a command the state machine cannot apply at all
	// (undecodable bytes, an unknown op): a bug or a version skew.
	CodeInternal
)

func (c Code) String() string {
	switch c {
	case CodeInvalidArgument:
		return "InvalidArgument"
	case CodeNotFound:
		return "NotFound"
	case CodeAlreadyExists:
		return "AlreadyExists"
	case CodeFailedPrecondition:
		return "FailedPrecondition"
	case CodeResourceExhausted:
		return "ResourceExhausted"
	case CodeInternal:
		return "Internal"
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error is the typed error every FSM operation returns.
type Error struct {
	Code Code
	Msg  string
	// Reason, when set, is the machine-readable cause the API layer puts
	// in the error's google.rpc.ErrorInfo (package apierr's reasons).
	Reason string
	// Meta, when set, is the ErrorInfo's metadata beside the reason (a
	// barrier's current generation, a wait group's status).
	Meta map[string]string
	// Field, when set, is the request field an InvalidArgument is about
	// (its proto name); the API names it in a structured detail, so that
	// a client can point at what its user gave without reading Msg.
	Field string
}

// ReasonWeightExceedsPermits marks an acquire whose weight can never fit
// (the same string as apierr.WeightExceedsPermits; fsm imports no gRPC).
const ReasonWeightExceedsPermits = "WEIGHT_EXCEEDS_PERMITS"

func (e *Error) Error() string { return e.Code.String() + ": " + e.Msg }

// Is lets errors.Is match on the code alone: errors.Is(err, fsm.ErrNotFound).
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code && t.Msg == ""
	}
	return false
}

// Sentinels for errors.Is; they match any *Error of the same code.
var (
	ErrInvalidArgument    = &Error{Code: CodeInvalidArgument}
	ErrNotFound           = &Error{Code: CodeNotFound}
	ErrAlreadyExists      = &Error{Code: CodeAlreadyExists}
	ErrFailedPrecondition = &Error{Code: CodeFailedPrecondition}
	ErrResourceExhausted  = &Error{Code: CodeResourceExhausted}
	ErrInternal           = &Error{Code: CodeInternal}
)

// ErrVersionMismatch is the message docs/API.md (Versions and updates) fixes for a failed
// expected_version check.
const msgVersionMismatch = "version mismatch"

// versionMismatch is the failed expected_version check (Msg exactly
// msgVersionMismatch, Field expected_version).
func versionMismatch() *Error {
	e := invalid(msgVersionMismatch)
	e.Field = "expected_version"
	return e
}

func errf(c Code, format string, a ...any) *Error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, a...)}
}

func invalid(format string, a ...any) *Error { return errf(CodeInvalidArgument, format, a...) }

// invalidField is an InvalidArgument about one request field: the message
// is "field: " and the rest.
func invalidField(field, format string, a ...any) *Error {
	e := errf(CodeInvalidArgument, "%s: "+format, append([]any{field}, a...)...)
	e.Field = field
	return e
}

// ReasonOutOfRange marks a number outside its bounds (the same string as
// apierr.OutOfRange); Meta holds the bounds under MetaMin and MetaMax.
const ReasonOutOfRange = "OUT_OF_RANGE"

// Metadata keys of ReasonOutOfRange (apierr.KeyMin, KeyMax) and of
// ReasonWeightExceedsPermits (apierr.KeyPermits).
const (
	MetaMin     = "min"
	MetaMax     = "max"
	MetaPermits = "permits"
)

// noMax is outOfRange's max for a number without an upper bound.
const noMax = math.MaxInt64

// outOfRange is invalidField for a number outside min..max (inclusive;
// max noMax: no upper bound), with the bounds in Meta.
func outOfRange(field string, min, max int64, format string, a ...any) *Error {
	e := invalidField(field, format, a...)
	e.Reason = ReasonOutOfRange
	e.Meta = map[string]string{MetaMin: strconv.FormatInt(min, 10)}
	if max != noMax {
		e.Meta[MetaMax] = strconv.FormatInt(max, 10)
	}
	return e
}

// Not-found reasons: which thing is missing (the same strings as package
// apierr's; rpc's tests check they agree).
const (
	ReasonNamespaceNotFound = "NAMESPACE_NOT_FOUND"
	ReasonSemaphoreNotFound = "SEMAPHORE_NOT_FOUND"
	ReasonLeaseNotFound     = "LEASE_NOT_FOUND"
	ReasonTokenNotFound     = "TOKEN_NOT_FOUND"
)

func notFound(reason, format string, a ...any) *Error {
	e := errf(CodeNotFound, format, a...)
	e.Reason = reason
	return e
}

func namespaceNotFound(ns string) *Error {
	return notFound(ReasonNamespaceNotFound, "namespace %q not found", ns)
}

func semaphoreNotFound(ns, sem string) *Error {
	return notFound(ReasonSemaphoreNotFound, "semaphore %q not found in namespace %q", sem, ns)
}
