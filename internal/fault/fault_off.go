//go:build !faultinject

package fault

// On is the build-time fault switch of the fault-injection suite. In
// every normal build it is constant false and the compiler drops the
// faulty paths; see fault_on.go.
func On(string) bool { return false }
