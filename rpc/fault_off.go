//go:build !faultinject

package rpc

// faultOn is the build-time fault switch of the fault-injection suite. In
// every normal build it is constant false and the compiler drops the
// faulty paths; see fault_on.go.
func faultOn(string) bool { return false }
