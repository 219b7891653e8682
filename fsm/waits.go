package fsm

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Wait groups and barriers (DESIGN.md, "Wait groups and barriers").
// Stored: wait groups, their completed jobs, barriers, and the arrivals of
// each barrier's current and previous generation. Derived and rebuilt on
// restore: the timers (every time-driven change: a wait group's expiry,
// a finished group's deletion, an inactive barrier's deletion, by due
// time), the set of (barrier, generation, process) arrivals, and the
// counts per namespace.

// MaxKeepSeconds bounds delete_after_finished_seconds and
// delete_inactive_after_seconds (30 days).
const MaxKeepSeconds = 30 * 24 * 3600

// WaitKind says which primitive a WaitKey names.
type WaitKind uint8

const (
	KindWaitGroup WaitKind = iota + 1
	KindBarrier
)

// WaitKey names a wait group or a barrier.
type WaitKey struct {
	Kind            WaitKind
	Namespace, Name string
}

type wgRec struct {
	ns, name, desc       string
	md                   map[string]string
	counter, completed   int64
	status               pb.WaitGroupStatus
	expiresAt            int64 // 0: never
	deleteAfter          int64 // seconds after finishedAt; 0: kept
	finishedAt           int64
	version              int64
	createdAt, updatedAt int64
	lastActivity         int64
}

type jobRec struct {
	ns, wg, id  string
	completedAt int64
	md          map[string]string
}

type barRec struct {
	ns, name, desc       string
	md                   map[string]string
	expected, arrived    int64
	generation           int64
	deleteInactive       int64 // seconds after lastActivity; 0: never
	version              int64
	createdAt, updatedAt int64
	lastActivity         int64
}

// arrivalRec is one participant of one generation; seq is its arrival
// number in that generation (1 = first).
type arrivalRec struct {
	ns, bar   string
	gen, seq  int64
	proc      string
	arrivedAt int64
	md        map[string]string
}

type arrivalKey struct {
	ns, bar, proc string
	gen           int64
}

type waitCounts struct{ waitGroups, barriers int64 }

// timerKey is one time-driven change, due at `at`.
type timerKey struct {
	at       int64
	kind     timerKind
	ns, name string
}

type timerKind uint8

const (
	timerWGExpire timerKind = iota + 1
	timerWGDelete
	timerBarDelete
)

func lessWG(a, b wgRec) bool {
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c < 0
	}
	return a.name < b.name
}

func lessJob(a, b jobRec) bool {
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c < 0
	}
	if c := strings.Compare(a.wg, b.wg); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

func lessBar(a, b barRec) bool {
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c < 0
	}
	return a.name < b.name
}

func lessArrival(a, b arrivalRec) bool {
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c < 0
	}
	if c := strings.Compare(a.bar, b.bar); c != 0 {
		return c < 0
	}
	if a.gen != b.gen {
		return a.gen < b.gen
	}
	return a.seq < b.seq
}

func lessTimer(a, b timerKey) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c < 0
	}
	return a.name < b.name
}

// satSeconds is at + sec seconds in nanoseconds, saturating.
func satSeconds(at, sec int64) int64 {
	if sec > math.MaxInt64/1_000_000_000 {
		return math.MaxInt64
	}
	return satAdd(at, sec*1e9)
}

// timer is the group's next time-driven change, if any.
func (w wgRec) timer() (timerKey, bool) {
	switch {
	case w.status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE && w.expiresAt > 0:
		return timerKey{at: w.expiresAt, kind: timerWGExpire, ns: w.ns, name: w.name}, true
	case w.status != pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE && w.deleteAfter > 0:
		return timerKey{at: satSeconds(w.finishedAt, w.deleteAfter), kind: timerWGDelete, ns: w.ns, name: w.name}, true
	}
	return timerKey{}, false
}

func (b barRec) timer() (timerKey, bool) {
	if b.deleteInactive > 0 {
		return timerKey{at: satSeconds(b.lastActivity, b.deleteInactive), kind: timerBarDelete, ns: b.ns, name: b.name}, true
	}
	return timerKey{}, false
}

// effective is the group as seen at now: an ACTIVE group past its
// expires_at is EXPIRED (finished at expires_at) even before the leader's
// expiry command applies, as that command will make it. Reads pass a now
// no later than the newest command applied (settledNow).
func (w wgRec) effective(now int64) wgRec {
	if w.status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE && w.expiresAt > 0 && w.expiresAt <= now {
		w.status, w.finishedAt = pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED, w.expiresAt
	}
	return w
}

func (w wgRec) view() *pb.WaitGroup {
	return &pb.WaitGroup{Name: w.name, Description: w.desc, Counter: w.counter, CompletedJobs: w.completed, Status: w.status,
		ExpiresAt: w.expiresAt, DeleteAfterFinishedSeconds: w.deleteAfter, FinishedAt: w.finishedAt, Metadata: copyMetadata(w.md),
		Version: w.version, CreatedAt: w.createdAt, UpdatedAt: w.updatedAt, LastActivityAt: w.lastActivity}
}

func (b barRec) view() *pb.Barrier {
	return &pb.Barrier{Name: b.name, Description: b.desc, ExpectedProcesses: b.expected, ArrivedProcesses: b.arrived,
		Generation: b.generation, DeleteInactiveAfterSeconds: b.deleteInactive, Metadata: copyMetadata(b.md), Version: b.version,
		CreatedAt: b.createdAt, UpdatedAt: b.updatedAt, LastActivityAt: b.lastActivity}
}

func (j jobRec) view() *pb.WaitGroupJob {
	return &pb.WaitGroupJob{JobId: j.id, CompletedAt: j.completedAt, Metadata: copyMetadata(j.md)}
}

func (r arrivalRec) view() *pb.BarrierParticipant {
	return &pb.BarrierParticipant{ProcessId: r.proc, Generation: r.gen, ArrivedAt: r.arrivedAt, Metadata: copyMetadata(r.md)}
}

// ---- state helpers ----

func (s *state) getWG(ns, name string) (wgRec, bool) {
	return s.waitGroups.Get(wgRec{ns: ns, name: name})
}

func (s *state) getBar(ns, name string) (barRec, bool) {
	return s.barriers.Get(barRec{ns: ns, name: name})
}

// putWG stores a group and moves its timer.
func (s *state) putWG(w wgRec) {
	if old, ok := s.waitGroups.Set(w); ok {
		if t, ok := old.timer(); ok {
			s.timers.Delete(t)
		}
	} else {
		s.addCounts(w.ns, 1, 0)
	}
	if t, ok := w.timer(); ok {
		s.timers.Set(t)
	}
}

// delWG deletes a group, its jobs and its timer.
func (s *state) delWG(w wgRec) {
	old, ok := s.waitGroups.Delete(w)
	if !ok {
		return
	}
	if t, ok := old.timer(); ok {
		s.timers.Delete(t)
	}
	var jobs []jobRec
	s.jobs.Ascend(jobRec{ns: w.ns, wg: w.name}, func(j jobRec) bool {
		if j.ns != w.ns || j.wg != w.name {
			return false
		}
		jobs = append(jobs, j)
		return true
	})
	for _, j := range jobs {
		s.jobs.Delete(j)
	}
	s.addCounts(w.ns, -1, 0)
}

func (s *state) putBar(b barRec) {
	if old, ok := s.barriers.Set(b); ok {
		if t, ok := old.timer(); ok {
			s.timers.Delete(t)
		}
	} else {
		s.addCounts(b.ns, 0, 1)
	}
	if t, ok := b.timer(); ok {
		s.timers.Set(t)
	}
}

func (s *state) delBar(b barRec) {
	old, ok := s.barriers.Delete(b)
	if !ok {
		return
	}
	if t, ok := old.timer(); ok {
		s.timers.Delete(t)
	}
	s.dropArrivals(b.ns, b.name, 0, math.MaxInt64)
	s.addCounts(b.ns, 0, -1)
}

// dropArrivals removes a barrier's arrivals of generations [from, to].
func (s *state) dropArrivals(ns, bar string, from, to int64) {
	var drop []arrivalRec
	s.arrivals.Ascend(arrivalRec{ns: ns, bar: bar, gen: from}, func(r arrivalRec) bool {
		if r.ns != ns || r.bar != bar || r.gen > to {
			return false
		}
		drop = append(drop, r)
		return true
	})
	for _, r := range drop {
		s.arrivals.Delete(r)
		delete(s.arrived, arrivalKey{ns: r.ns, bar: r.bar, proc: r.proc, gen: r.gen})
	}
}

// addCounts moves a namespace's counts (an entry at zero is dropped).
func (s *state) addCounts(ns string, wgs, bars int64) {
	c := s.waitCount[ns]
	c.waitGroups += wgs
	c.barriers += bars
	if c == (waitCounts{}) {
		delete(s.waitCount, ns)
	} else {
		s.waitCount[ns] = c
	}
}

// dropNamespaceWaits deletes every wait group and barrier of a namespace.
func (a *applier) dropNamespaceWaits(ns string) {
	s := a.s
	var wgs []wgRec
	s.waitGroups.Ascend(wgRec{ns: ns}, func(w wgRec) bool {
		if w.ns != ns {
			return false
		}
		wgs = append(wgs, w)
		return true
	})
	for _, w := range wgs {
		s.delWG(w)
		a.res.Woken = append(a.res.Woken, WaitKey{KindWaitGroup, ns, w.name})
	}
	var bars []barRec
	s.barriers.Ascend(barRec{ns: ns}, func(b barRec) bool {
		if b.ns != ns {
			return false
		}
		bars = append(bars, b)
		return true
	})
	for _, b := range bars {
		s.delBar(b)
		a.res.Woken = append(a.res.Woken, WaitKey{KindBarrier, ns, b.name})
	}
	delete(s.waitCount, ns)
}

// nextTimer is the earliest time-driven change, if any (read under the lock).
func (s *state) nextTimer() (int64, bool) {
	if t, ok := s.timers.Min(); ok {
		return t.at, true
	}
	return 0, false
}

// ---- validation ----

// ValidateJobID checks a job_id: 1..128 bytes of [-_0-9a-zA-Z].
func ValidateJobID(field, v string) error { return ValidateName(field, v) }

// ValidateCount checks a count field that must be 1..max.
func ValidateCount(field string, v, max int64) error {
	if v < 1 || v > max {
		return outOfRange(field, 1, max, "must be 1..%d, got %d", max, v)
	}
	return nil
}

// ValidateKeepSeconds checks delete_after_finished_seconds and
// delete_inactive_after_seconds: 0 (never) up to 30 days.
func ValidateKeepSeconds(field string, v int64) error {
	if v < 0 || v > MaxKeepSeconds {
		return outOfRange(field, 0, MaxKeepSeconds, "must be 0 (never) or 1..%d (30 days), got %d", MaxKeepSeconds, v)
	}
	return nil
}

// ValidateGeneration checks an expected_generation (>= 1).
func ValidateGeneration(field string, v int64) error {
	if v < 1 {
		return outOfRange(field, 1, noMax, "must be >= 1 (generations start at 1), got %d", v)
	}
	return nil
}

func validateExpiresAt(field string, v, now int64) *Error {
	if v != 0 && v <= now {
		return invalidField(field, "must be 0 (never) or later than the leader's now (%d), got %d", now, v)
	}
	return nil
}

// ---- errors ----

// Reasons of wait-group and barrier errors (the same strings as package
// apierr's).
const (
	ReasonWaitGroupNotFound  = "WAIT_GROUP_NOT_FOUND"
	ReasonBarrierNotFound    = "BARRIER_NOT_FOUND"
	ReasonGenerationMismatch = "GENERATION_MISMATCH"
	ReasonWaitGroupNotActive = "WAIT_GROUP_NOT_ACTIVE"
	// MetaCurrentGeneration and MetaStatus are ErrorInfo metadata keys.
	MetaCurrentGeneration = "current_generation"
	MetaStatus            = "status"
)

func waitGroupNotFound(ns, name string) *Error {
	return notFound(ReasonWaitGroupNotFound, "wait group %q not found in namespace %q", name, ns)
}

func barrierNotFound(ns, name string) *Error {
	return notFound(ReasonBarrierNotFound, "barrier %q not found in namespace %q", name, ns)
}

// GenerationMismatch is the error of a generation that is not the one
// asked about; current names the barrier's generation.
func GenerationMismatch(current int64, format string, a ...any) *Error {
	e := errf(CodeFailedPrecondition, format, a...)
	e.Reason = ReasonGenerationMismatch
	e.Meta = map[string]string{MetaCurrentGeneration: strconv.FormatInt(current, 10)}
	return e
}

func notActive(w wgRec, what string) *Error {
	e := errf(CodeFailedPrecondition, "wait group %q is %s: %s", w.name, statusWord(w.status), what)
	e.Reason = ReasonWaitGroupNotActive
	e.Meta = map[string]string{MetaStatus: w.status.String()}
	return e
}

func statusWord(s pb.WaitGroupStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "WAIT_GROUP_STATUS_"))
}

// ---- apply: wait groups ----

func (a *applier) createWaitGroup(c *fsmpb.CreateWaitGroup) *Error {
	s := a.s
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("wait_group_name", c.Name),
		ValidateDescription("description", c.Description), ValidateCount("counter", c.Counter, s.limits.MaxWaitGroupCounter),
		ValidateKeepSeconds("delete_after_finished_seconds", c.DeleteAfterFinishedSeconds),
		ValidateMetadata("metadata", c.Metadata)); err != nil {
		return err
	}
	if err := validateExpiresAt("expires_at", c.ExpiresAt, a.now); err != nil {
		return err
	}
	ns, ok := s.getNS(c.NamespaceName)
	if !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	if _, ok := s.getWG(ns.name, c.Name); ok {
		return errf(CodeAlreadyExists, "wait group %q already exists in namespace %q", c.Name, ns.name)
	}
	if s.waitCount[ns.name].waitGroups >= s.limits.MaxWaitGroupsPerNamespace {
		return errf(CodeResourceExhausted, "wait groups: limit of %d per namespace reached in %q", s.limits.MaxWaitGroupsPerNamespace, ns.name)
	}
	if err := s.overQuota(); err != nil {
		return err
	}
	w := wgRec{ns: ns.name, name: c.Name, desc: c.Description, md: copyMetadata(c.Metadata), counter: c.Counter,
		status: pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE, expiresAt: c.ExpiresAt, deleteAfter: c.DeleteAfterFinishedSeconds,
		version: 1, createdAt: a.now, updatedAt: a.now, lastActivity: a.now}
	s.putWG(w)
	a.res.WaitGroup = w.view()
	return nil
}

// liveWG finds a group as of the command's now (EXPIRED once past
// expires_at, whether or not the expiry command applied yet).
func (a *applier) liveWG(ns, name string) (wgRec, *Error) {
	if _, ok := a.s.getNS(ns); !ok {
		return wgRec{}, namespaceNotFound(ns)
	}
	w, ok := a.s.getWG(ns, name)
	if !ok {
		return wgRec{}, waitGroupNotFound(ns, name)
	}
	return w.effective(a.now), nil
}

// finishWG completes or expires a group in this command and wakes its
// waiters.
func (a *applier) finishWG(w wgRec, status pb.WaitGroupStatus, at int64) wgRec {
	w.status, w.finishedAt = status, at
	a.res.FinishedWaitGroups++
	a.res.Woken = append(a.res.Woken, WaitKey{KindWaitGroup, w.ns, w.name})
	return w
}

func (a *applier) updateWaitGroup(c *fsmpb.UpdateWaitGroup) *Error {
	s := a.s
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("wait_group_name", c.Name),
		ValidateDescription("description", c.Description), ValidateCount("counter", c.Counter, s.limits.MaxWaitGroupCounter),
		ValidateKeepSeconds("delete_after_finished_seconds", c.DeleteAfterFinishedSeconds),
		ValidateMetadata("metadata", c.Metadata), ValidateExpectedVersion("expected_version", c.ExpectedVersion)); err != nil {
		return err
	}
	w, err := a.liveWG(c.NamespaceName, c.Name)
	if err != nil {
		return err
	}
	if w.version != c.ExpectedVersion {
		return versionMismatch()
	}
	if w.status != pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE {
		return notActive(w, "only an active wait group can be updated")
	}
	if c.ExpiresAt != w.expiresAt {
		if err := validateExpiresAt("expires_at", c.ExpiresAt, a.now); err != nil {
			return err
		}
	}
	if c.Counter < w.completed {
		return errf(CodeFailedPrecondition, "counter: %d is below the %d jobs completed already", c.Counter, w.completed)
	}
	oldSize := wgSize(w)
	w.desc, w.md, w.counter, w.expiresAt, w.deleteAfter = c.Description, copyMetadata(c.Metadata), c.Counter, c.ExpiresAt, c.DeleteAfterFinishedSeconds
	if err := s.growsOverQuota(oldSize, wgSize(w)); err != nil {
		return err
	}
	w.version, w.updatedAt = w.version+1, a.now
	if w.completed == w.counter {
		w = a.finishWG(w, pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED, a.now)
	}
	s.putWG(w)
	a.res.WaitGroup = w.view()
	return nil
}

func (a *applier) deleteWaitGroup(c *fsmpb.DeleteWaitGroup) *Error {
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("wait_group_name", c.Name)); err != nil {
		return err
	}
	if _, ok := a.s.getNS(c.NamespaceName); !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	w, ok := a.s.getWG(c.NamespaceName, c.Name)
	if !ok {
		return nil // deleting a missing wait group is not an error
	}
	a.s.delWG(w)
	a.res.Existed = true
	a.res.Woken = append(a.res.Woken, WaitKey{KindWaitGroup, w.ns, w.name})
	return nil
}

func (a *applier) completeJobs(c *fsmpb.CompleteJobs) *Error {
	s := a.s
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("wait_group_name", c.Name)); err != nil {
		return err
	}
	if n := int64(len(c.Jobs)); n < 1 || n > s.limits.MaxJobsPerCall {
		return invalidField("jobs", "must hold 1..%d jobs, got %d", s.limits.MaxJobsPerCall, n)
	}
	for i, j := range c.Jobs {
		if err := firstErr(ValidateJobID("jobs["+strconv.Itoa(i)+"].job_id", j.GetJobId()),
			ValidateMetadata("jobs["+strconv.Itoa(i)+"].metadata", j.GetMetadata())); err != nil {
			return err
		}
	}
	w, err := a.liveWG(c.NamespaceName, c.Name)
	if err != nil {
		return err
	}
	// The new jobs, each once (a job twice in one call counts once; the
	// first metadata stays).
	var fresh []*fsmpb.JobCompletion
	seen := make(map[string]struct{}, len(c.Jobs))
	for _, j := range c.Jobs {
		if _, dup := seen[j.JobId]; dup {
			continue
		}
		seen[j.JobId] = struct{}{}
		if _, done := s.jobs.Get(jobRec{ns: w.ns, wg: w.name, id: j.JobId}); !done {
			fresh = append(fresh, j)
		}
	}
	if len(fresh) == 0 {
		// A retry of jobs all completed already: the state as it is.
		a.res.WaitGroup = w.view()
		return nil
	}
	if w.status != pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE {
		return notActive(w, "it takes no new jobs")
	}
	if w.completed+int64(len(fresh)) > w.counter {
		return invalidField("jobs", "too many jobs: %d new would take completed_jobs to %d, past counter %d", len(fresh), w.completed+int64(len(fresh)), w.counter)
	}
	if err := s.overQuota(); err != nil {
		return err
	}
	for _, j := range fresh {
		s.jobs.Set(jobRec{ns: w.ns, wg: w.name, id: j.JobId, completedAt: a.now, md: copyMetadata(j.Metadata)})
	}
	w.completed += int64(len(fresh))
	w.lastActivity = a.now
	if faultWGEarlyComplete && w.counter > 1 && w.completed == w.counter-1 {
		w.counter-- // broken on purpose (faultinject builds only): complete one job early
	}
	if w.completed == w.counter {
		w = a.finishWG(w, pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED, a.now)
	}
	s.putWG(w)
	a.res.WaitGroup = w.view()
	a.res.NewJobs = int64(len(fresh))
	return nil
}

// ---- apply: barriers ----

func (a *applier) createBarrier(c *fsmpb.CreateBarrier) *Error {
	s := a.s
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("barrier_name", c.Name),
		ValidateDescription("description", c.Description),
		ValidateCount("expected_processes", c.ExpectedProcesses, s.limits.MaxBarrierProcesses),
		ValidateKeepSeconds("delete_inactive_after_seconds", c.DeleteInactiveAfterSeconds),
		ValidateMetadata("metadata", c.Metadata)); err != nil {
		return err
	}
	ns, ok := s.getNS(c.NamespaceName)
	if !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	if _, ok := s.getBar(ns.name, c.Name); ok {
		return errf(CodeAlreadyExists, "barrier %q already exists in namespace %q", c.Name, ns.name)
	}
	if s.waitCount[ns.name].barriers >= s.limits.MaxBarriersPerNamespace {
		return errf(CodeResourceExhausted, "barriers: limit of %d per namespace reached in %q", s.limits.MaxBarriersPerNamespace, ns.name)
	}
	if err := s.overQuota(); err != nil {
		return err
	}
	b := barRec{ns: ns.name, name: c.Name, desc: c.Description, md: copyMetadata(c.Metadata), expected: c.ExpectedProcesses,
		generation: 1, deleteInactive: c.DeleteInactiveAfterSeconds, version: 1, createdAt: a.now, updatedAt: a.now, lastActivity: a.now}
	s.putBar(b)
	a.res.Barrier = b.view()
	return nil
}

func (a *applier) liveBar(ns, name string) (barRec, *Error) {
	if _, ok := a.s.getNS(ns); !ok {
		return barRec{}, namespaceNotFound(ns)
	}
	b, ok := a.s.getBar(ns, name)
	if !ok {
		return barRec{}, barrierNotFound(ns, name)
	}
	return b, nil
}

// trip ends the barrier's current generation in this command: its waiters
// are woken, the next generation starts empty, and the arrivals of the
// generation before the one that tripped are no longer kept.
func (a *applier) trip(b barRec) barRec {
	a.s.dropArrivals(b.ns, b.name, 0, b.generation-1)
	b.generation++
	b.arrived = 0
	a.res.Woken = append(a.res.Woken, WaitKey{KindBarrier, b.ns, b.name})
	a.res.AllArrived, a.res.Tripped = true, true
	return b
}

func (a *applier) updateBarrier(c *fsmpb.UpdateBarrier) *Error {
	s := a.s
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("barrier_name", c.Name),
		ValidateDescription("description", c.Description),
		ValidateCount("expected_processes", c.ExpectedProcesses, s.limits.MaxBarrierProcesses),
		ValidateKeepSeconds("delete_inactive_after_seconds", c.DeleteInactiveAfterSeconds),
		ValidateMetadata("metadata", c.Metadata), ValidateExpectedVersion("expected_version", c.ExpectedVersion)); err != nil {
		return err
	}
	b, err := a.liveBar(c.NamespaceName, c.Name)
	if err != nil {
		return err
	}
	if b.version != c.ExpectedVersion {
		return versionMismatch()
	}
	if c.ExpectedProcesses < b.arrived {
		return errf(CodeFailedPrecondition, "expected_processes: %d is below the %d processes arrived at generation %d",
			c.ExpectedProcesses, b.arrived, b.generation)
	}
	oldSize := barSize(b)
	b.desc, b.md, b.expected, b.deleteInactive = c.Description, copyMetadata(c.Metadata), c.ExpectedProcesses, c.DeleteInactiveAfterSeconds
	if err := s.growsOverQuota(oldSize, barSize(b)); err != nil {
		return err
	}
	b.version, b.updatedAt = b.version+1, a.now
	if b.arrived > 0 && b.arrived == b.expected {
		b = a.trip(b)
	}
	s.putBar(b)
	a.res.Barrier = b.view()
	return nil
}

func (a *applier) deleteBarrier(c *fsmpb.DeleteBarrier) *Error {
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("barrier_name", c.Name)); err != nil {
		return err
	}
	if _, ok := a.s.getNS(c.NamespaceName); !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	b, ok := a.s.getBar(c.NamespaceName, c.Name)
	if !ok {
		return nil
	}
	a.s.delBar(b)
	a.res.Existed = true
	a.res.Woken = append(a.res.Woken, WaitKey{KindBarrier, b.ns, b.name})
	return nil
}

func (a *applier) arriveAtBarrier(c *fsmpb.ArriveAtBarrier) *Error {
	s := a.s
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("barrier_name", c.Name),
		ValidateProcessID("process_id", c.ProcessId), ValidateGeneration("expected_generation", c.ExpectedGeneration),
		ValidateMetadata("metadata", c.Metadata)); err != nil {
		return err
	}
	b, err := a.liveBar(c.NamespaceName, c.Name)
	if err != nil {
		return err
	}
	g := c.ExpectedGeneration
	_, counted := s.arrived[arrivalKey{ns: b.ns, bar: b.name, proc: c.ProcessId, gen: g}]
	switch {
	case g == b.generation && counted:
		// A retry of a counted arrival: nothing changes.
	case g == b.generation:
		if err := s.overQuota(); err != nil {
			return err
		}
		b.arrived++
		r := arrivalRec{ns: b.ns, bar: b.name, gen: g, seq: b.arrived, proc: c.ProcessId, arrivedAt: a.now, md: copyMetadata(c.Metadata)}
		s.arrivals.Set(r)
		s.arrived[arrivalKey{ns: r.ns, bar: r.bar, proc: r.proc, gen: g}] = struct{}{}
		b.lastActivity = a.now
		if b.arrived >= b.expected || faultBarrierEarlyTrip && b.arrived >= b.expected-1 { // broken on purpose (faultinject builds only)
			b = a.trip(b)
		}
		s.putBar(b)
	case g == b.generation-1 && counted:
		// A retry of an arrival whose generation has tripped since.
		a.res.AllArrived = true
	default:
		return GenerationMismatch(b.generation, "expected_generation: barrier %q is at generation %d, got %d", b.name, b.generation, g)
	}
	a.res.Barrier = b.view()
	return nil
}

// ---- apply: timers ----

func (a *applier) expireTimers(c *fsmpb.ExpireTimers) *Error {
	s := a.s
	max := int(c.GetMax())
	var due []timerKey
	s.timers.Scan(func(t timerKey) bool {
		if t.at > a.now || (max > 0 && len(due) >= max) {
			return false
		}
		due = append(due, t)
		return true
	})
	for _, t := range due {
		// The timer goes whatever its record says, so that a due timer can
		// never keep the leader's loop proposing the same command.
		s.timers.Delete(t)
		switch t.kind {
		case timerWGExpire:
			if w, ok := s.getWG(t.ns, t.name); ok && w.status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE {
				s.putWG(a.finishWG(w, pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED, w.expiresAt))
			}
		case timerWGDelete:
			if w, ok := s.getWG(t.ns, t.name); ok {
				s.delWG(w)
				a.res.Woken = append(a.res.Woken, WaitKey{KindWaitGroup, w.ns, w.name})
			}
		case timerBarDelete:
			if b, ok := s.getBar(t.ns, t.name); ok {
				s.delBar(b)
				a.res.Woken = append(a.res.Woken, WaitKey{KindBarrier, b.ns, b.name})
			}
		}
	}
	return nil
}

// ---- invariants ----

// checkWaits checks the wait-group and barrier tables against indexes
// rebuilt from them: timers, arrivals by process, counts per namespace,
// jobs per group, arrival numbers per generation.
func (s *state) checkWaits() error {
	timers := map[timerKey]bool{}
	counts := map[string]waitCounts{}
	var err error
	fail := func(format string, a ...any) bool {
		err = fmt.Errorf(format, a...)
		return false
	}
	s.waitGroups.Scan(func(w wgRec) bool {
		if _, ok := s.getNS(w.ns); !ok {
			return fail("wait group %s/%s in a missing namespace", w.ns, w.name)
		}
		var n int64
		s.jobs.Ascend(jobRec{ns: w.ns, wg: w.name}, func(j jobRec) bool {
			if j.ns != w.ns || j.wg != w.name {
				return false
			}
			n++
			return true
		})
		active := w.status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE
		switch {
		case n != w.completed:
			return fail("wait group %s/%s: %d jobs stored for %d completed", w.ns, w.name, n, w.completed)
		case w.completed > w.counter || (w.status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED) != (w.completed == w.counter):
			return fail("wait group %s/%s: %v with %d of %d", w.ns, w.name, w.status, w.completed, w.counter)
		case active != (w.finishedAt == 0):
			return fail("wait group %s/%s: %v finished at %d", w.ns, w.name, w.status, w.finishedAt)
		case w.status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED && (w.expiresAt == 0 || w.finishedAt != w.expiresAt):
			return fail("wait group %s/%s: expired at %d with expires_at %d", w.ns, w.name, w.finishedAt, w.expiresAt)
		}
		if t, ok := w.timer(); ok {
			timers[t] = true
		}
		c := counts[w.ns]
		c.waitGroups++
		counts[w.ns] = c
		return true
	})
	if err != nil {
		return err
	}
	var jobs int64
	s.jobs.Scan(func(jobRec) bool { jobs++; return true })
	var completed int64
	s.waitGroups.Scan(func(w wgRec) bool { completed += w.completed; return true })
	if jobs != completed {
		return fmt.Errorf("%d job records for %d completed jobs in all", jobs, completed)
	}
	arrived := map[arrivalKey]struct{}{}
	s.barriers.Scan(func(b barRec) bool {
		if _, ok := s.getNS(b.ns); !ok {
			return fail("barrier %s/%s in a missing namespace", b.ns, b.name)
		}
		if b.generation < 1 || b.arrived < 0 || b.arrived >= b.expected {
			return fail("barrier %s/%s: generation %d, %d arrived of %d", b.ns, b.name, b.generation, b.arrived, b.expected)
		}
		var cur int64
		s.arrivals.Ascend(arrivalRec{ns: b.ns, bar: b.name}, func(r arrivalRec) bool {
			if r.ns != b.ns || r.bar != b.name {
				return false
			}
			if r.gen < 1 || (r.gen != b.generation && r.gen != b.generation-1) {
				return fail("barrier %s/%s at generation %d keeps an arrival of generation %d", b.ns, b.name, b.generation, r.gen)
			}
			if r.gen == b.generation {
				cur++
				if r.seq != cur {
					return fail("barrier %s/%s: arrival number %d where %d was due", b.ns, b.name, r.seq, cur)
				}
			}
			k := arrivalKey{ns: r.ns, bar: r.bar, proc: r.proc, gen: r.gen}
			if _, dup := arrived[k]; dup {
				return fail("barrier %s/%s generation %d: %q arrived twice", b.ns, b.name, r.gen, r.proc)
			}
			arrived[k] = struct{}{}
			return true
		})
		if err != nil {
			return false
		}
		if cur != b.arrived {
			return fail("barrier %s/%s: %d arrival records for %d arrived", b.ns, b.name, cur, b.arrived)
		}
		if t, ok := b.timer(); ok {
			timers[t] = true
		}
		c := counts[b.ns]
		c.barriers++
		counts[b.ns] = c
		return true
	})
	if err != nil {
		return err
	}
	if s.arrivals.Len() != len(arrived) || len(s.arrived) != len(arrived) {
		return fmt.Errorf("arrivals: %d records, %d indexed, %d of live barriers", s.arrivals.Len(), len(s.arrived), len(arrived))
	}
	for k := range arrived {
		if _, ok := s.arrived[k]; !ok {
			return fmt.Errorf("arrival of %q at %s/%s generation %d not indexed", k.proc, k.ns, k.bar, k.gen)
		}
	}
	if s.timers.Len() != len(timers) {
		return fmt.Errorf("timers: %d indexed, %d due to the records", s.timers.Len(), len(timers))
	}
	s.timers.Scan(func(t timerKey) bool {
		if !timers[t] {
			return fail("timer %+v matches no record", t)
		}
		return true
	})
	if err != nil {
		return err
	}
	if !maps.Equal(counts, s.waitCount) {
		return fmt.Errorf("wait counts per namespace %v, records say %v", s.waitCount, counts)
	}
	return nil
}
