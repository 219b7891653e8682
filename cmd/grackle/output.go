package main

// Output: -o table (aligned, for people), -o json (one JSON object per
// call, for scripts; see jsonValue for its shape), -o id (identifiers only,
// one a line), -o template=TEMPLATE (a Go text/template over the same
// object as -o json).

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// view is what a command prints.
type view struct {
	msg   proto.Message     // -o json and -o template: the whole response
	table func(t *tableOut) // -o table
	ids   []string          // -o id: one a line
	next  string            // next pagination token, if any
	done  string            // -o table: a closing line (deletes, releases)
}

const templatePrefix = "template="

// checkOutput validates -o (a template is parsed here, so that a bad one
// is a usage error before any call is made).
func checkOutput(cmd *cobra.Command, format string) error {
	switch format {
	case "table", "json", "id":
		return nil
	}
	if t, ok := strings.CutPrefix(format, templatePrefix); ok {
		if _, err := parseTemplate(t); err != nil {
			return flagError(cmd, flagOutput, "bad template: %v", err)
		}
		return nil
	}
	return flagError(cmd, flagOutput, "must be table, json, id or template='{{...}}'")
}

func parseTemplate(t string) (*template.Template, error) {
	return template.New("output").Option("missingkey=error").Parse(t)
}

// show prints v in the format chosen with -o.
func (a *app) show(v view) error {
	return render(a.stdout, a.stderr, a.output, a.now(), v)
}

func render(stdout, stderr io.Writer, format string, now time.Time, v view) error {
	switch format {
	case "json":
		return writeJSON(stdout, v.msg)
	case "id":
		for _, id := range v.ids {
			fmt.Fprintln(stdout, id)
		}
		if v.next != "" {
			fmt.Fprintf(stderr, "next page: --page-token %s\n", v.next)
		}
		return nil
	case "table":
		t := &tableOut{w: stdout, now: now}
		if v.table != nil {
			v.table(t)
		}
		if v.done != "" {
			fmt.Fprintln(stdout, v.done)
		}
		if v.next != "" {
			fmt.Fprintf(stdout, "\nnext page: --page-token %s\n", v.next)
		}
		return nil
	}
	return writeTemplate(stdout, strings.TrimPrefix(format, templatePrefix), v.msg)
}

// writeJSON writes m as one indented JSON object (jsonValue's shape).
func writeJSON(w io.Writer, m proto.Message) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(jsonValue(m.ProtoReflect())); err != nil {
		return &exitError{code: exitCallFailed, msg: "encoding json: " + err.Error()}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// writeTemplate executes the -o template over m's JSON object (so
// '{{.semaphore.permits}}' is what jq calls .semaphore.permits); a newline
// ends the output if the template does not end with one.
func writeTemplate(w io.Writer, text string, m proto.Message) error {
	t, err := parseTemplate(text)
	if err != nil {
		return usagef("output: bad template: %v", err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, jsonValue(m.ProtoReflect())); err != nil {
		return &exitError{code: exitUsage, msg: "output: template: " + oneLine(err.Error())}
	}
	if b := buf.Bytes(); len(b) > 0 && b[len(b)-1] != '\n' {
		buf.WriteByte('\n')
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// jsonValue is the -o json shape of a message, documented in the README
// (Output formats) and kept stable:
//   - every field present, under its proto name (lease_id, active_holds);
//     an unset message field is null;
//   - counts and other integers (permits, active_holds, version, weight,
//     fencing_token, ttl_seconds, term, ...) are JSON numbers;
//   - each nanosecond timestamp (a field named *_at, waiting_since or
//     deadline) is a decimal string, since it exceeds 2^53 and a double
//     cannot hold it (jq 1.6, JavaScript), with its RFC 3339 form beside it
//     in <field>_rfc3339 ("" when the timestamp is 0);
//   - enums are their names; maps are objects; keys are sorted.
func jsonValue(m protoreflect.Message) map[string]any {
	out := map[string]any{}
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		name := string(fd.Name())
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			arr := make([]any, 0, l.Len())
			for j := 0; j < l.Len(); j++ {
				arr = append(arr, scalarJSON(fd, l.Get(j)))
			}
			out[name] = arr
		case fd.IsMap():
			obj := map[string]any{}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				obj[k.String()] = scalarJSON(fd.MapValue(), mv)
				return true
			})
			out[name] = obj
		case fd.Kind() == protoreflect.MessageKind && !m.Has(fd):
			out[name] = nil
		default:
			out[name] = scalarJSON(fd, v)
			if isTimestamp(fd) {
				rfc := ""
				if ns := v.Int(); ns != 0 {
					rfc = time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
				}
				out[name+"_rfc3339"] = rfc
			}
		}
	}
	return out
}

// isTimestamp: the API's timestamps are int64 nanoseconds named *_at (and,
// for waiters, waiting_since and deadline).
func isTimestamp(fd protoreflect.FieldDescriptor) bool {
	if fd.Kind() != protoreflect.Int64Kind || fd.IsList() || fd.IsMap() {
		return false
	}
	n := string(fd.Name())
	return strings.HasSuffix(n, "_at") || n == "waiting_since" || n == "deadline"
}

func scalarJSON(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return jsonValue(v.Message())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return int32(v.Enum())
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if isTimestamp(fd) {
			return strconv.FormatInt(v.Int(), 10)
		}
		return v.Int() // a JSON number; a Go int64 for -o template ({{gt .x 5}})
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return v.Uint()
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	default:
		return v.Interface()
	}
}

// tableOut writes aligned blocks: key/value blocks for one entity, column
// tables for lists. Blocks are separated by a blank line.
type tableOut struct {
	w      io.Writer
	now    time.Time
	blocks int
}

func (t *tableOut) sep() {
	if t.blocks > 0 {
		fmt.Fprintln(t.w)
	}
	t.blocks++
}

// kv writes "Key:  value" rows.
func (t *tableOut) kv(rows ...[2]string) {
	t.sep()
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], cell(r[1]))
	}
	tw.Flush()
}

// table writes a header and rows in aligned columns.
func (t *tableOut) table(header []string, rows [][]string) {
	t.sep()
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cs := make([]string, len(r))
		for i, c := range r {
			cs[i] = cell(c)
		}
		fmt.Fprintln(tw, strings.Join(cs, "\t"))
	}
	tw.Flush()
}

// cell keeps a value on one line and out of the column separators.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

// truncate shortens s to n runes for list columns.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// fmtTime renders a nanosecond timestamp as RFC 3339 UTC plus how long ago
// (or how soon) it is: "2023-09-27T14:50:39Z (3m12s ago)".
func fmtTime(ns int64, now time.Time) string {
	if ns == 0 {
		return "-"
	}
	t := time.Unix(0, ns).UTC()
	return t.Format(time.RFC3339) + " (" + relative(t, now) + ")"
}

func relative(t, now time.Time) string {
	if d := now.Sub(t); d >= 0 {
		return humanDuration(d) + " ago"
	} else {
		return "in " + humanDuration(-d)
	}
}

// humanDuration is a short, coarse duration: 250ms, 45s, 3m12s, 5h03m, 2d04h.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%ds", d/time.Second)
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, (d%time.Minute)/time.Second)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", d/time.Hour, (d%time.Hour)/time.Minute)
	default:
		return fmt.Sprintf("%dd%02dh", d/(24*time.Hour), (d%(24*time.Hour))/time.Hour)
	}
}

// fmtMetadata renders a map as "k1=v1, k2=v2" in key order.
func fmtMetadata(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// outcomeName is ACQUIRED for ACQUIRE_OUTCOME_ACQUIRED.
func outcomeName(o pb.AcquireOutcome) string {
	return strings.TrimPrefix(o.String(), "ACQUIRE_OUTCOME_")
}

// ---- entities ----

func namespaceKV(ns *pb.Namespace, now time.Time) [][2]string {
	return [][2]string{
		{"Name", ns.GetName()},
		{"Description", ns.GetDescription()},
		{"Metadata", fmtMetadata(ns.GetMetadata())},
		{"Version", itoa(ns.GetVersion())},
		{"Created", fmtTime(ns.GetCreatedAt(), now)},
		{"Updated", fmtTime(ns.GetUpdatedAt(), now)},
	}
}

func semaphoreKV(s *pb.Semaphore, now time.Time) [][2]string {
	return [][2]string{
		{"Name", s.GetName()},
		{"Description", s.GetDescription()},
		{"Permits", itoa(s.GetPermits())},
		{"Active holds", fmt.Sprintf("%d (%d free)", s.GetActiveHolds(), s.GetPermits()-s.GetActiveHolds())},
		{"Holders", itoa(s.GetActiveHoldersCount())},
		{"Metadata", fmtMetadata(s.GetMetadata())},
		{"Version", itoa(s.GetVersion())},
		{"Created", fmtTime(s.GetCreatedAt(), now)},
		{"Updated", fmtTime(s.GetUpdatedAt(), now)},
		{"Last activity", fmtTime(s.GetLastActivityAt(), now)},
	}
}

func leaseKV(l *pb.SemaphoreLease, now time.Time) [][2]string {
	return [][2]string{
		{"Lease ID", l.GetLeaseId()},
		{"Process ID", l.GetProcessId()},
		{"TTL", fmt.Sprintf("%ds", l.GetTtlSeconds())},
		{"Created", fmtTime(l.GetCreatedAt(), now)},
		{"Expires", fmtTime(l.GetExpiresAt(), now)},
	}
}

func namespaceView(resp proto.Message, ns *pb.Namespace) view {
	return view{
		msg:   resp,
		ids:   []string{ns.GetName()},
		table: func(t *tableOut) { t.kv(namespaceKV(ns, t.now)...) },
	}
}

func semaphoreView(resp proto.Message, s *pb.Semaphore) view {
	return view{
		msg:   resp,
		ids:   []string{s.GetName()},
		table: func(t *tableOut) { t.kv(semaphoreKV(s, t.now)...) },
	}
}

func leaseView(resp proto.Message, l *pb.SemaphoreLease) view {
	return view{
		msg:   resp,
		ids:   []string{l.GetLeaseId()},
		table: func(t *tableOut) { t.kv(leaseKV(l, t.now)...) },
	}
}

// doneView is the output of a call with an empty response.
func doneView(resp proto.Message, what string) view {
	return view{msg: resp, done: what}
}

func acquireView(r *pb.AcquireSemaphoreResponse) view {
	v := view{msg: r}
	if h := r.GetHolder(); h != nil && r.GetOutcome() == pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		v.ids = []string{strconv.FormatUint(h.GetFencingToken(), 10)}
	}
	v.table = func(t *tableOut) {
		rows := [][2]string{{"Outcome", outcomeName(r.GetOutcome())}}
		if h := r.GetHolder(); h != nil {
			rows = append(rows,
				[2]string{"Fencing token", strconv.FormatUint(h.GetFencingToken(), 10)},
				[2]string{"Lease ID", h.GetLeaseId()},
				[2]string{"Process ID", h.GetProcessId()},
				[2]string{"Weight", itoa(h.GetWeight())},
				[2]string{"Locked", fmtTime(h.GetLockedAt(), t.now)},
				[2]string{"Expires", fmtTime(h.GetExpiresAt(), t.now)},
				[2]string{"Holder metadata", fmtMetadata(h.GetMetadata())},
			)
		}
		if s := r.GetSemaphore(); s != nil {
			rows = append(rows,
				[2]string{"Semaphore", s.GetName()},
				[2]string{"Permits", itoa(s.GetPermits())},
				[2]string{"Active holds", fmt.Sprintf("%d (%d free)", s.GetActiveHolds(), s.GetPermits()-s.GetActiveHolds())},
				[2]string{"Holders", itoa(s.GetActiveHoldersCount())},
			)
		}
		t.kv(rows...)
	}
	return v
}

// ---- lists ----

// pagedResponse is a List call's response: a page of items, and the token
// of the next page.
type pagedResponse interface {
	proto.Message
	GetNextPaginationToken() string
}

// listView shows a page of a list, the same way for every kind of item:
// for -o id each item's id, for -o table a table of header over one row
// per item.
func listView[T any](r pagedResponse, items []T, id func(T) string, header []string, row func(x T, now time.Time) []string) view {
	v := view{msg: r, next: r.GetNextPaginationToken()}
	for _, x := range items {
		v.ids = append(v.ids, id(x))
	}
	v.table = func(t *tableOut) {
		var rows [][]string
		for _, x := range items {
			rows = append(rows, row(x, t.now))
		}
		t.table(header, rows)
	}
	return v
}

func namespacesView(r *pb.ListNamespacesResponse) view {
	return listView(r, r.GetNamespaces(), (*pb.Namespace).GetName,
		[]string{"NAME", "VERSION", "DESCRIPTION", "METADATA", "CREATED"},
		func(ns *pb.Namespace, now time.Time) []string {
			return []string{ns.GetName(), itoa(ns.GetVersion()), truncate(ns.GetDescription(), 40),
				truncate(fmtMetadata(ns.GetMetadata()), 40), fmtTime(ns.GetCreatedAt(), now)}
		})
}

func semaphoresView(r *pb.ListSemaphoresResponse) view {
	return listView(r, r.GetSemaphores(), (*pb.Semaphore).GetName,
		[]string{"NAME", "PERMITS", "HOLDS", "HOLDERS", "VERSION", "LAST ACTIVITY", "DESCRIPTION"},
		func(s *pb.Semaphore, now time.Time) []string {
			return []string{s.GetName(), itoa(s.GetPermits()), itoa(s.GetActiveHolds()),
				itoa(s.GetActiveHoldersCount()), itoa(s.GetVersion()), fmtTime(s.GetLastActivityAt(), now),
				truncate(s.GetDescription(), 40)}
		})
}

func holdersView(r *pb.ListSemaphoreHoldersResponse) view {
	return listView(r, r.GetHolders(), (*pb.SemaphoreHolder).GetLeaseId,
		[]string{"LEASE ID", "PROCESS ID", "WEIGHT", "FENCING TOKEN", "LOCKED", "EXPIRES", "METADATA"},
		func(h *pb.SemaphoreHolder, now time.Time) []string {
			return []string{h.GetLeaseId(), h.GetProcessId(), itoa(h.GetWeight()),
				strconv.FormatUint(h.GetFencingToken(), 10), fmtTime(h.GetLockedAt(), now),
				fmtTime(h.GetExpiresAt(), now), truncate(fmtMetadata(h.GetMetadata()), 40)}
		})
}

func leasesView(r *pb.ListSemaphoreLeasesResponse) view {
	return listView(r, r.GetLeases(), (*pb.SemaphoreLease).GetLeaseId,
		[]string{"LEASE ID", "PROCESS ID", "TTL", "CREATED", "EXPIRES"},
		func(l *pb.SemaphoreLease, now time.Time) []string {
			return []string{l.GetLeaseId(), l.GetProcessId(), fmt.Sprintf("%ds", l.GetTtlSeconds()),
				fmtTime(l.GetCreatedAt(), now), fmtTime(l.GetExpiresAt(), now)}
		})
}

// ---- cluster ----

func membersTable(t *tableOut, members []*pb.Member) {
	var rows [][]string
	ago := func(ms int64) string { return humanDuration(time.Duration(ms)*time.Millisecond) + " ago" }
	for _, m := range members {
		contact, lag := "-", "-"
		switch {
		case m.GetState() == "unreachable" && m.ReplicationContactMs != nil:
			// The leader answering: when the member last answered its
			// Raft heartbeats.
			contact = ago(m.GetReplicationContactMs())
		case m.GetState() == "unreachable" && m.LastSeenMs != nil:
			contact = ago(m.GetLastSeenMs()) // when it last answered a probe
		case m.GetState() != "unreachable" && m.GetLastContactMs() >= 0 && m.GetState() != "leader":
			contact = ago(m.GetLastContactMs())
		}
		if m.ReplicationLagEntries != nil {
			lag = strconv.FormatUint(m.GetReplicationLagEntries(), 10)
		}
		ver, applied := "-", "-"
		if m.GetVersion() != "" {
			ver = m.GetVersion()
		}
		if m.GetReachability() == "self" || m.GetReachability() == "reachable" {
			applied = strconv.FormatUint(m.GetAppliedIndex(), 10)
		}
		rows = append(rows, []string{m.GetNodeId(), m.GetSuffrage(), m.GetState(), m.GetRaftAddress(),
			m.GetGrpcAddress(), contact, lag, applied, ver})
	}
	t.table([]string{"NODE ID", "SUFFRAGE", "STATE", "RAFT ADDRESS", "GRPC ADDRESS", "LAST CONTACT", "LAG", "APPLIED", "VERSION"}, rows)
}

func memberIDs(members []*pb.Member) []string {
	ids := make([]string, 0, len(members))
	for _, m := range members {
		ids = append(ids, m.GetNodeId())
	}
	return ids
}

func clusterStatusView(r *pb.GetClusterStatusResponse) view {
	return view{
		msg: r,
		ids: []string{r.GetLeaderId()},
		table: func(t *tableOut) {
			leader := r.GetLeaderId()
			if leader == "" {
				leader = "none (no leader right now)"
			} else if addr := r.GetLeaderAddress(); addr != "" {
				leader += " (" + addr + ")"
			}
			t.kv(
				[2]string{"Leader", leader},
				[2]string{"Term", strconv.FormatUint(r.GetTerm(), 10)},
				[2]string{"Commit index", strconv.FormatUint(r.GetCommitIndex(), 10)},
				[2]string{"Applied index", strconv.FormatUint(r.GetAppliedIndex(), 10)},
			)
			membersTable(t, r.GetMembers())
		},
	}
}

func membersView(resp proto.Message, members []*pb.Member) view {
	return view{
		msg:   resp,
		ids:   memberIDs(members),
		table: func(t *tableOut) { membersTable(t, members) },
	}
}
