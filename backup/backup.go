// Package backup is Grackle's snapshot file: what `grackle snapshot save`
// writes, `inspect` reads and `restore` turns into the data dir of a new
// cluster. A file is
//
//	magic "GRKSNAP1" | uint32 big-endian header length | header (SnapshotFileHeader) |
//	state machine snapshot data (header.data_size bytes) | SHA-256 of all bytes before it
//
// The checksum covers the magic and the header, so a file cut short,
// padded or altered anywhere is refused before its data is used.
package backup

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"google.golang.org/protobuf/proto"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Magic starts every snapshot file.
const Magic = "GRKSNAP1"

// maxHeader bounds the header a reader accepts.
const maxHeader = 1 << 20

// ErrCorrupt is wrapped by every error about a file's content.
var ErrCorrupt = errors.New("snapshot file is corrupt")

// ErrNotState is wrapped, with ErrCorrupt, when the file is intact (its
// checksum matches) but the state machine cannot read its data: a file of
// another kind or of a newer, incompatible version.
var ErrNotState = errors.New("the checksum matches but the state machine refuses the data")

// Writer writes a snapshot file: the header first, then exactly
// header.DataSize bytes of data through Write, then Close appends the
// checksum.
type Writer struct {
	w       io.Writer
	h       hash.Hash
	left    uint64
	written bool
}

// NewWriter writes the magic and the header to w.
func NewWriter(w io.Writer, hdr *pb.SnapshotFileHeader) (*Writer, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(hdr)
	if err != nil {
		return nil, err
	}
	sw := &Writer{w: w, h: sha256.New(), left: hdr.DataSize}
	pre := make([]byte, 0, len(Magic)+4+len(b))
	pre = append(pre, Magic...)
	pre = binary.BigEndian.AppendUint32(pre, uint32(len(b)))
	pre = append(pre, b...)
	if _, err := sw.write(pre); err != nil {
		return nil, err
	}
	return sw, nil
}

func (sw *Writer) write(p []byte) (int, error) {
	sw.h.Write(p)
	return sw.w.Write(p)
}

// Write writes state machine data.
func (sw *Writer) Write(p []byte) (int, error) {
	if uint64(len(p)) > sw.left {
		return 0, fmt.Errorf("backup: %d bytes of data beyond the header's data_size", uint64(len(p))-sw.left)
	}
	sw.left -= uint64(len(p))
	return sw.write(p)
}

// Close writes the checksum; it fails if less data than announced came.
func (sw *Writer) Close() error {
	if sw.left != 0 {
		return fmt.Errorf("backup: %d bytes of data missing", sw.left)
	}
	_, err := sw.w.Write(sw.h.Sum(nil))
	return err
}

// Info is what a verified file says about itself.
type Info struct {
	Header   *pb.SnapshotFileHeader
	Checksum [sha256.Size]byte
	Size     int64 // bytes of the whole file
}

// Verify reads the whole file, checks its structure and checksum, and
// returns its header. data, when not nil, receives the state machine data
// as it is read (the caller must not trust it unless Verify returns nil).
func Verify(r io.Reader, data io.Writer) (*Info, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	h := sha256.New()
	tr := io.TeeReader(br, h)
	pre := make([]byte, len(Magic)+4)
	if _, err := io.ReadFull(tr, pre); err != nil {
		return nil, fmt.Errorf("%w: too short for a header (%v)", ErrCorrupt, err)
	}
	if string(pre[:len(Magic)]) != Magic {
		return nil, fmt.Errorf("%w: not a Grackle snapshot file (bad magic %q)", ErrCorrupt, pre[:len(Magic)])
	}
	n := binary.BigEndian.Uint32(pre[len(Magic):])
	if n > maxHeader {
		return nil, fmt.Errorf("%w: header length %d above %d", ErrCorrupt, n, maxHeader)
	}
	hb := make([]byte, n)
	if _, err := io.ReadFull(tr, hb); err != nil {
		return nil, fmt.Errorf("%w: header cut short (%v)", ErrCorrupt, err)
	}
	hdr := &pb.SnapshotFileHeader{}
	if err := proto.Unmarshal(hb, hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if data == nil {
		data = io.Discard
	}
	got, err := io.CopyN(data, tr, int64(hdr.DataSize))
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: truncated: %d of %d data bytes", ErrCorrupt, got, hdr.DataSize)
		}
		return nil, err
	}
	var want [sha256.Size]byte
	sum := h.Sum(nil)
	if k, err := io.ReadFull(br, want[:]); err != nil {
		return nil, fmt.Errorf("%w: truncated: checksum missing (%d of %d bytes)", ErrCorrupt, k, sha256.Size)
	}
	if extra, _ := br.Read(make([]byte, 1)); extra > 0 {
		return nil, fmt.Errorf("%w: bytes after the checksum", ErrCorrupt)
	}
	if string(sum) != string(want[:]) {
		return nil, fmt.Errorf("%w: checksum mismatch (file says %x, content hashes to %x)", ErrCorrupt, want[:8], sum[:8])
	}
	return &Info{Header: hdr, Checksum: want, Size: int64(len(pre)) + int64(n) + int64(hdr.DataSize) + sha256.Size}, nil
}

// VerifyFile verifies the file at path; see Verify.
func VerifyFile(path string, data io.Writer) (*Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Verify(f, data)
}
