package raftnode

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	bolt "go.etcd.io/bbolt"
)

// checkWAL checks a raft-wal log before raft-wal opens it. raft-wal itself
// trusts its files more than a node may: it recreates a missing tail
// segment empty, it takes a truncated tail for a torn write and drops
// what was cut off, and it reads sealed segments without their
// checksums. Each of those would start the node on a log that lost
// acknowledged entries. So, for every segment the metadata lists:
//
//   - the file must exist and be at least its preallocated size (raft-wal
//     preallocates every segment, so a shorter file was cut);
//   - its header must name the segment;
//   - every batch of records must match the CRC of its commit frame, but
//     for the tail's last one, which may be a torn write the crash
//     interrupted before it was acknowledged.
//
// The format is raft-wal's segment/format.go (version 0): a 32-byte file
// header, then 8-byte-aligned frames of an 8-byte header (type, 3 zero
// bytes, then the payload length or, for a commit frame, the CRC-32C of
// every byte since the previous commit frame).
func checkWAL(dir string, snaps []string, snapIndex uint64, m *logMark) error {
	meta := filepath.Join(dir, metadb.FileName)
	fi, err := os.Stat(meta)
	switch {
	case errors.Is(err, os.ErrNotExist) || (err == nil && fi.Size() == 0):
		if len(snaps) > 0 || m != nil {
			return lostOrDamaged(m, filepath.Dir(dir), meta, snaps, "missing or empty")
		}
		// Without its metadata raft-wal would delete every segment it
		// finds as unlisted: a log and a vote lost without a word.
		if segs, _ := filepath.Glob(filepath.Join(dir, "*.wal")); len(segs) > 0 {
			return damaged(meta, "missing or empty beside %d segment file(s) (%s...): the Raft log and the vote (current term) are lost", len(segs), filepath.Base(segs[0]))
		}
		return nil // a node that stopped before its first write
	case err != nil:
		return fmt.Errorf("%s: %w", meta, err)
	}
	var state types.PersistentState
	if err := checkBolt(meta, metadb.MetaBucket, metadb.StableBucket, len(snaps) > 0, func(tx *bolt.Tx) error {
		raw := tx.Bucket([]byte(metadb.MetaBucket)).Get([]byte(metadb.MetaKey))
		if raw == nil {
			return nil
		}
		if err := json.Unmarshal(raw, &state); err != nil {
			return damaged(meta, "its segment list does not decode: %v", err)
		}
		return nil
	}); err != nil {
		return err
	}
	for i, si := range state.Segments {
		tail := i == len(state.Segments)-1
		if tail != si.SealTime.IsZero() {
			return damaged(meta, "segment %d (%d of %d) is sealed=%v: only the last may be unsealed, and it must be", si.ID, i+1, len(state.Segments), !si.SealTime.IsZero())
		}
		if !tail && si.IndexStart == 0 {
			// raft-wal v0.4.0 sealed the tail this way when raft cut a
			// suffix off the log (a follower dropping a deposed leader's
			// entries); reads from it then fail, and raft cannot start.
			return damaged(filepath.Join(dir, segment.FileName(si)), "segment %d is sealed but the metadata records no index for it (a log truncation by raft-wal v0.4.0, before 0.4.1 sealed such a segment properly): its entries cannot be read", si.ID)
		}
		var seal tailSeal
		if err := checkSegment(filepath.Join(dir, segment.FileName(si)), si, tail, &seal, lostFrom(m, snapIndex)); err != nil {
			return err
		}
		if tail && seal.sealed {
			return finishRotation(meta, state, seal)
		}
	}
	return nil
}

// lostFrom is the mark when entries up to its index must be in the log
// (no snapshot holds them), else nil.
func lostFrom(m *logMark, snapIndex uint64) *logMark {
	if m == nil || snapIndex >= m.Index {
		return nil
	}
	return m
}

// tailSeal is what a tail segment's file says of its seal: sealed when its
// last committed batch holds the index frame (at indexStart), after the
// entries up to maxIndex.
type tailSeal struct {
	sealed     bool
	indexStart uint64
	maxIndex   uint64
}

// finishRotation completes a rotation that a crash cut short. raft-wal
// seals a full segment in its last append (entries, the index frame, the
// commit, an fsync) and records it in the metadata afterwards, with the
// next segment; a crash in between leaves a tail sealed on disk and
// unsealed in the metadata, on which raft-wal refuses every append
// (ErrSealed), on every start. This records what the rotation would have:
// the tail sealed with its last index and its index's offset, and a new
// tail after it, whose file raft-wal creates when it opens (as it does
// when a crash came after the metadata and before the file).
func finishRotation(meta string, state types.PersistentState, seal tailSeal) error {
	n := len(state.Segments)
	old := state.Segments[n-1]
	now := time.Now()
	old.SealTime, old.MaxIndex, old.IndexStart = now, seal.maxIndex, seal.indexStart
	state.Segments[n-1] = old
	state.Segments = append(state.Segments, types.SegmentInfo{ID: state.NextSegmentID, BaseIndex: seal.maxIndex + 1,
		MinIndex: seal.maxIndex + 1, SizeLimit: old.SizeLimit, Codec: old.Codec, CreateTime: now})
	state.NextSegmentID++
	// raft-wal's own metadata store writes it (the node holds the WAL's
	// lock, so nothing else has the file open).
	db := &metadb.BoltMetaDB{}
	_, err := db.Load(filepath.Dir(meta))
	if err == nil {
		err = db.CommitState(state)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: record the rotation a crash interrupted: %w", meta, err)
	}
	return nil
}

const (
	walHeaderLen = 32
	walFrameLen  = 8
	walMagic     = 0x58eb6b0d
	frameEntry   = 1
	frameIndex   = 2
	frameCommit  = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkSegment checks one segment file; for the tail it reports in seal
// whether the file is sealed. m is the data dir's mark when the log must
// hold its index (nil: no mark, or a snapshot holds it).
func checkSegment(path string, si types.SegmentInfo, tail bool, seal *tailSeal, m *logMark) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return damaged(path, "missing: the metadata lists segment %d (entries from %d) and its entries are lost", si.ID, si.BaseIndex)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	short := si.SizeLimit > 0 && fi.Size() < int64(si.SizeLimit)
	truncated := func() error {
		return damaged(path, "%d bytes where the segment was preallocated to %d (truncated)", fi.Size(), si.SizeLimit)
	}
	if short && !tail {
		return truncated()
	}
	// A tail shorter than its preallocation that holds no commit is the
	// file of a rotation whose preallocation failed (a full disk): raft-wal
	// created it, could not size it, and wrote nothing to it. It is
	// removed, so that raft-wal starts it again, preallocated.
	startAgain := func() error {
		if m != nil && m.Index >= si.BaseIndex {
			// The mark says this segment held entries (no snapshot holds
			// them): what is here was cut.
			return lost(m, filepath.Dir(filepath.Dir(path)), path, "%d bytes and no committed entry: segment %d held the entries from index %d", fi.Size(), si.ID, si.BaseIndex)
		}
		f.Close()
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove the empty tail segment %s: %w", path, err)
		}
		return nil
	}
	r := bufio.NewReaderSize(f, 1<<20)
	hdr := make([]byte, walHeaderLen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		if short {
			return startAgain()
		}
		return damaged(path, "no segment header: %v", err)
	}
	if binary.LittleEndian.Uint64(hdr[0:8]) != walMagic {
		if tail && allZero(hdr) {
			// Created, never committed to: raft-wal starts it afresh. A short
			// one is a preallocation that failed part-way (ext4 raises the
			// size as it allocates): removed like an empty one, or raft-wal
			// would append into it without the space behind it, and the next
			// start would refuse it as truncated.
			if short {
				return startAgain()
			}
			return nil
		}
		return damaged(path, "not a raft-wal segment (bad magic or version)")
	}
	if base, id := binary.LittleEndian.Uint64(hdr[8:16]), binary.LittleEndian.Uint64(hdr[16:24]); base != si.BaseIndex || id != si.ID {
		return damaged(path, "its header names segment %d from index %d, the metadata %d from %d", id, base, si.ID, si.BaseIndex)
	}
	crc := crc32.Update(0, castagnoli, hdr) // the first batch covers the header
	var off int64 = walHeaderLen
	entries, committed, commits := 0, 0, 0
	badCommit := int64(-1)                // offset of a commit frame whose CRC did not match
	indexAt := int64(-1)                  // offset of an index frame in the batch being read
	var committedEnd int64 = walHeaderLen // the end of the last batch whose commit matched
	fh := make([]byte, walFrameLen)
	buf := make([]byte, 64<<10)
	for off+walFrameLen <= fi.Size() {
		if _, err := io.ReadFull(r, fh); err != nil {
			return damaged(path, "unreadable at offset %d: %v", off, err)
		}
		typ, n := fh[0], binary.LittleEndian.Uint32(fh[4:8])
		if typ == 0 && allZero(fh) {
			break // the end of what was written
		}
		if fh[1] != 0 || fh[2] != 0 || fh[3] != 0 || typ > frameCommit || typ == 0 {
			return damaged(path, "a corrupt frame header at offset %d", off)
		}
		if typ == frameCommit {
			commits++
			if badCommit >= 0 {
				return damaged(path, "the records before offset %d do not match their checksum", badCommit)
			}
			if n != crc {
				badCommit = off
			} else {
				committed = entries
				committedEnd = off + walFrameLen
				if indexAt >= 0 {
					// raft-wal's IndexStart is where the index's data
					// begins, after the frame header.
					seal.sealed, seal.indexStart = true, uint64(indexAt)+walFrameLen
					seal.maxIndex = si.BaseIndex + uint64(entries) - 1
				}
			}
			indexAt = -1
			crc = 0
			off += walFrameLen
			continue
		}
		crc = crc32.Update(crc, castagnoli, fh)
		size := int64(n) + int64((walFrameLen-n%walFrameLen)%walFrameLen)
		if off+walFrameLen+size > fi.Size() {
			if short {
				break // judged below, as a short tail
			}
			return damaged(path, "a record at offset %d of %d bytes runs past the end of the file", off, n)
		}
		for left := size; left > 0; {
			k := min(left, int64(len(buf)))
			if _, err := io.ReadFull(r, buf[:k]); err != nil {
				return damaged(path, "unreadable at offset %d: %v", off, err)
			}
			crc = crc32.Update(crc, castagnoli, buf[:k])
			left -= k
		}
		switch typ {
		case frameEntry:
			entries++
		case frameIndex:
			indexAt = off
		}
		off += walFrameLen + size
	}
	if short {
		if commits == 0 {
			return startAgain()
		}
		return truncated()
	}
	if badCommit >= 0 && !tail {
		return damaged(path, "the records before offset %d do not match their checksum", badCommit)
	}
	if !tail && (!seal.sealed || seal.indexStart != si.IndexStart) {
		return damaged(path, "the metadata records its index at offset %d, the file holds a committed index at %d (0: none)", si.IndexStart, seal.indexStart)
	}
	// A torn last batch of the tail was never acknowledged; raft-wal drops
	// it. Anything else must hold the entries the metadata says it does.
	if !tail && si.MaxIndex >= si.BaseIndex && uint64(committed) < si.MaxIndex-si.BaseIndex+1 {
		return damaged(path, "holds %d committed entries where the metadata records %d to %d", committed, si.BaseIndex, si.MaxIndex)
	}
	// Records read past the last good commit are a torn batch. (A tail
	// whose next frame header is zero is taken as ending there, as raft-wal
	// takes it: the rest is not read.)
	if tail && (off > committedEnd || badCommit >= 0) {
		f.Close()
		return clearTornTail(path, committedEnd, fi.Size())
	}
	return nil
}

// clearTornTail zeroes whatever follows the tail's last committed batch
// (the bytes of a torn batch), so that what raft-wal writes next is all
// that follows it. raft-wal starts writing again at the last commit but
// leaves the torn bytes beyond what it writes: after a shorter batch and a
// restart, the check would read them as a damaged record and refuse a log
// that lost nothing. It runs only after a crash that tore a batch, writes
// only what is not zero, and syncs before raft-wal opens the file.
func clearTornTail(path string, from, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	zero := make([]byte, len(buf))
	wrote := false
	for off := from; off < size; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if n > 0 && !allZero(buf[:n]) {
			if _, err := f.WriteAt(zero[:n], off); err != nil {
				return fmt.Errorf("clear the torn batch at the end of %s: %w", path, err)
			}
			wrote = true
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: %w", path, err)
		}
		if n == 0 {
			break
		}
		off += int64(n)
	}
	if wrote {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("clear the torn batch at the end of %s: %w", path, err)
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
