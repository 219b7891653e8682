package check

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/jepsen/history"
	"github.com/grackle-coord/grackle/tlsutil"
)

// Access checks that TLS and access control never got in the way of a
// client that had every right: in a run whose clients hold valid
// certificates and tokens with the roles they need, no call may be
// answered Unauthenticated or PermissionDenied, or FailedPrecondition with
// reason TLS_REQUIRED, whatever the faults (a restarted node, a wiped and
// rejoined one, a new leader must all know the tokens the log holds). It
// also reports what the runner saw outside the recorded operations
// (history.MetaTLSFailures, history.MetaHarnessRefusals). A plain run
// passes trivially; the check is not skipped there, since a refusal in a
// run without access control is just as wrong.
//
// The recorder keeps classifying such an answer as indeterminate (the
// safe reading of an unexpected error), so the other checkers stay sound
// if it happens.
func Access(h *history.History) Result { return access(h, 0) }

func access(h *history.History, maxAnoms int) Result {
	t0 := time.Now()
	r := Result{Name: NameAccess, Stats: map[string]int64{}}
	an := newAnomalies(maxAnoms)
	for _, o := range h.Ops {
		kind := ""
		switch o.Code {
		case codes.Unauthenticated.String():
			kind = "unauthenticated"
		case codes.PermissionDenied.String():
			kind = "permission-denied"
		case codes.FailedPrecondition.String():
			if o.Reason == tlsutil.ReasonTLSRequired {
				kind = "tls-required"
			}
		}
		if kind == "" {
			continue
		}
		an.add(kind, fmt.Sprintf("%s of %s answered %s (reason %q) via %s", o.Kind, opObject(&o), o.Code, o.Reason, o.Node), []history.Op{o})
	}
	for _, k := range []struct{ meta, kind, what string }{
		{history.MetaTLSFailures, "tls-handshake", "TLS handshake failed for good"},
		{history.MetaHarnessRefusals, "harness-refused", "a harness call (setup, nemesis, leader lookup) was refused"},
	} {
		for _, line := range strings.Split(h.Meta[k.meta], "\n") {
			if line = strings.TrimSpace(line); line != "" {
				an.add(k.kind, k.what+": "+line, nil)
			}
		}
	}
	if s := h.Meta["secure"]; s != "" {
		r.Notes = append(r.Notes, "run with "+s)
	} else {
		r.Notes = append(r.Notes, "plaintext run without access control")
	}
	r.Stats["ops"] = int64(len(h.Ops))
	an.fill(&r)
	r.Elapsed = time.Since(t0)
	return r
}
