//go:build race

package fsm

// raceEnabled shrinks the slowest randomized tests under the race detector
// (which makes them several times slower) to keep the package under a minute.
const raceEnabled = true
