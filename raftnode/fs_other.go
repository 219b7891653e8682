//go:build !unix

package raftnode

// lockDir is a no-op where flock is missing: raft-wal's own metadata
// file is the only guard there.
func lockDir(string) (func(), error) { return func() {}, nil }

// freeBytes is unknown here.
func freeBytes(string) (uint64, bool) { return 0, false }

// syncDir is a no-op where a directory cannot be synced.
func syncDir(string) error { return nil }
