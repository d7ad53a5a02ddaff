package metalog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/diskless-sidecar/sidecar/internal/fsutil"
)

// Segment and snapshot file layout (docs/format/metadata-records.md).
const (
	segmentMagic  = "DSML"
	snapshotMagic = "DSMS"
	// fileFormatVersion 2 added group ends; version 1 segments are not
	// read.
	fileFormatVersion = 2
	// snapshotFormatVersion 4 holds an opaque payload that carries its own
	// format version (the coordinator's state encoding), so that a change
	// of the state's encoding changes the payload's version, not this
	// one. Versions 1 … 3 carried the state encoding's version here; they
	// refuse the open by name (ReadSnapshot).
	snapshotFormatVersion = 4
	// segmentHeaderSize: magic, format version uint32, base index int64.
	segmentHeaderSize = 16
	// snapshotHeaderSize: magic, format version uint32, index int64, data
	// length uint64; a CRC-32C of header and data follows the data.
	snapshotHeaderSize = 24
	segmentSuffix      = ".log"
	snapshotSuffix     = ".snapshot"
	tmpSuffix          = ".tmp"
	// maxRetainedAppendBuffer caps the frame buffer kept between appends.
	maxRetainedAppendBuffer = 4 << 20
)

// FileLog is the embedded metadata log, the default backend: segment files
// of CRC-framed records in one directory, appended with one write and one
// fsync per group, each group closed by a group end that lets replay keep
// or drop it whole, and snapshot files beside them
// (docs/format/metadata-records.md). It implements Log.
//
// The shard driver calls every method but WriteSnapshot and
// TruncateBefore, which run on the shard's snapshot goroutine,
// concurrently with Append. They touch only the snapshot files, the
// segments below their index (never the open one) and mu's fields.
//
// The directory must be used by one FileLog at a time, of one process:
// the caller holds it exclusively (cmd/sidecar: the data.dir lock).
type FileLog struct {
	dir    string
	logger *slog.Logger

	mu struct {
		sync.Mutex
		// segs are the segments' base indexes, ascending; the last one is
		// open as f.
		segs []int64
		// broken is set when a failed append could not be undone: the
		// file's content is unknown and every later call fails.
		broken error
	}
	f *os.File
	// size is the length of f up to the end of the last durable frame.
	size int64
	// next is the index of the next record appended.
	next int64
	// ready is set by a successful Replay; Append requires it.
	ready bool
	buf   []byte
	// fsync makes an append's data durable: (*os.File).Sync.
	fsync func(*os.File) error
}

var _ Log = (*FileLog)(nil)

// OpenFileLog opens (creating if needed) the embedded file log in dir
// (docs/format/metadata-records.md). It does not read the records: call
// Replay. logger receives the warnings of repairs (a torn tail, an
// unfinished segment roll, a damaged snapshot skipped); nil selects
// slog.Default(). Each successful Append is one write and one fsync.
// Errors: IO errors creating or listing dir.
func OpenFileLog(dir string, logger *slog.Logger) (*FileLog, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if err := fsutil.MkdirAll(dir); err != nil {
		return nil, err
	}
	l := &FileLog{dir: dir, logger: logger, fsync: (*os.File).Sync}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("metalog: open metadata log: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, tmpSuffix) {
			// A snapshot whose write did not complete.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("metalog: remove %s: %w", name, err)
			}
			continue
		}
		if base, ok := parseIndexName(name, segmentSuffix); ok {
			l.mu.segs = append(l.mu.segs, base)
		}
	}
	slices.Sort(l.mu.segs)
	if n := len(l.mu.segs); n >= 2 {
		// A last segment holding no record (its header at most) after
		// another is a roll that did not finish (createSegment failed and
		// appends went on in the segment before, or a crash came first):
		// it holds nothing, and the segment before ends where the log
		// does. Drop it, so Replay does not find segments out of order.
		path := l.segmentPath(l.mu.segs[n-1])
		if st, err := os.Stat(path); err == nil && st.Size() <= segmentHeaderSize {
			logger.Warn("metalog: removing an empty metadata log segment left by an unfinished roll", "file", path)
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("metalog: open metadata log: %w", err)
			}
			if err := fsutil.SyncDir(dir); err != nil {
				return nil, err
			}
			l.mu.segs = l.mu.segs[:n-1]
		}
	}
	if len(l.mu.segs) == 0 {
		if err := l.createSegment(0); err != nil {
			return nil, err
		}
		return l, nil
	}
	last := l.mu.segs[len(l.mu.segs)-1]
	f, err := os.OpenFile(l.segmentPath(last), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("metalog: open metadata log: %w", err)
	}
	l.f = f
	return l, nil
}

func parseIndexName(name, suffix string) (int64, bool) {
	num, ok := strings.CutSuffix(name, suffix)
	if !ok || len(num) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

func (l *FileLog) segmentPath(base int64) string {
	return filepath.Join(l.dir, fmt.Sprintf("%020d%s", base, segmentSuffix))
}

func (l *FileLog) snapshotPath(index int64) string {
	return filepath.Join(l.dir, fmt.Sprintf("%020d%s", index, snapshotSuffix))
}

// validSegmentHeader reports whether f starts with segment base's header
// (of any format version).
func validSegmentHeader(f *os.File, base int64) bool {
	hdr := make([]byte, segmentHeaderSize)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return false
	}
	return string(hdr[:4]) == segmentMagic && int64(binary.BigEndian.Uint64(hdr[8:])) == base
}

func segmentHeader(base int64) []byte {
	h := make([]byte, segmentHeaderSize)
	copy(h, segmentMagic)
	binary.BigEndian.PutUint32(h[4:], fileFormatVersion)
	binary.BigEndian.PutUint64(h[8:], uint64(base))
	return h
}

// removeSegment removes a segment that createSegment could not finish, so
// that appends going on in the previous one leave no segment out of order
// for the next Replay. If that fails too, Replay starts the header-only
// segment afresh or names it (see replaySegment).
func (l *FileLog) removeSegment(path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.logger.Error("metalog: removing an unfinished metadata log segment", "file", path, "err", err)
		return
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		l.logger.Error("metalog: removing an unfinished metadata log segment", "file", path, "err", err)
	}
}

// createSegment creates segment base, writes and fsyncs its header, fsyncs
// the directory and makes it the open segment (closing the previous one).
func (l *FileLog) createSegment(base int64) error {
	path := l.segmentPath(base)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("metalog: create segment: %w", err)
	}
	if err := writeHeaderSync(f, base); err != nil {
		f.Close()
		l.removeSegment(path)
		return err
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		f.Close()
		l.removeSegment(path)
		return err
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f = f
	l.size = segmentHeaderSize
	l.mu.Lock()
	if n := len(l.mu.segs); n == 0 || l.mu.segs[n-1] != base {
		l.mu.segs = append(l.mu.segs, base)
	}
	l.mu.Unlock()
	return nil
}

// segments returns a copy of the segments' base indexes and the error
// that broke the log, if any.
func (l *FileLog) segments() ([]int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.mu.segs), l.mu.broken
}

func (l *FileLog) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.broken
}

func (l *FileLog) setBroken(err error) {
	l.mu.Lock()
	l.mu.broken = err
	l.mu.Unlock()
}

func writeHeaderSync(f *os.File, base int64) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("metalog: segment header %s: %w", f.Name(), err)
	}
	if _, err := f.WriteAt(segmentHeader(base), 0); err != nil {
		return fmt.Errorf("metalog: segment header %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("metalog: segment header %s: %w", f.Name(), err)
	}
	return nil
}

// Replay implements Log.
func (l *FileLog) Replay(ctx context.Context, from int64, fn func(index int64, body []byte) error) (int64, error) {
	segs, broken := l.segments()
	if broken != nil {
		return 0, broken
	}
	l.ready = false
	if segs[0] > from {
		return 0, fmt.Errorf("%w: %s: records [%d, %d) are missing (first segment starts at %d)",
			ErrCorrupt, l.dir, from, segs[0], segs[0])
	}
	idx := int64(-1)
	for i, base := range segs {
		last := i == len(segs)-1
		if !last && segs[i+1] <= from {
			continue // wholly before from: superseded by a snapshot
		}
		if idx >= 0 && base != idx {
			return 0, fmt.Errorf("%w: segment %s starts at record %d, previous segment ends at %d",
				ErrCorrupt, l.segmentPath(base), base, idx)
		}
		var err error
		if idx, err = l.replaySegment(ctx, base, last, from, fn); err != nil {
			return 0, err
		}
	}
	if idx < from {
		return 0, fmt.Errorf("%w: %s ends at record %d, before the snapshot at %d", ErrCorrupt, l.dir, idx, from)
	}
	l.next = idx
	l.ready = true
	return idx, nil
}

// replaySegment reads segment base and returns the index after its last
// record. It calls fn only for records of groups whose group end verified
// them. In the last segment, bad data at the tail is a torn group and is
// truncated (tornTail); anywhere else it is ErrCorrupt.
func (l *FileLog) replaySegment(ctx context.Context, base int64, last bool, from int64, fn func(int64, []byte) error) (int64, error) {
	path := l.segmentPath(base)
	f := l.f
	if !last {
		var err error
		if f, err = os.Open(path); err != nil {
			return 0, fmt.Errorf("metalog: replay: %w", err)
		}
		defer f.Close()
	}
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("metalog: replay: %w", err)
	}
	size := st.Size()
	if last && (size < segmentHeaderSize || (size == segmentHeaderSize && !validSegmentHeader(f, base))) {
		// Crashed right after creating the file, before its header was
		// durable (short, or its size but not its bytes): nothing follows
		// the header, so start it afresh.
		l.logger.Warn("metalog: re-initialising metadata log segment with a torn header",
			"file", path, "bytes", size)
		if err := writeHeaderSync(f, base); err != nil {
			return 0, err
		}
		l.size = segmentHeaderSize
		return base, nil
	}
	hdr := make([]byte, segmentHeaderSize)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return 0, fmt.Errorf("%w: %s: reading header: %v", ErrCorrupt, path, err)
	}
	if string(hdr[:4]) != segmentMagic || int64(binary.BigEndian.Uint64(hdr[8:])) != base {
		return 0, fmt.Errorf("%w: %s: bad segment header %x", ErrCorrupt, path, hdr)
	}
	if v := binary.BigEndian.Uint32(hdr[4:]); v != fileFormatVersion {
		return 0, fmt.Errorf("%w: %s: segment format version %d, this build reads only version %d: the data.dir was written by an older pre-release build; start on a new data.dir",
			ErrCorrupt, path, v, fileFormatVersion)
	}
	gr := newGroupReader(io.NewSectionReader(f, segmentHeaderSize, size-segmentHeaderSize), segmentHeaderSize, size)
	idx := base
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		bodies, err := gr.next(idx)
		if err == io.EOF {
			break
		}
		if err != nil {
			if !isFrameError(err) {
				return 0, fmt.Errorf("metalog: replay %s: %w", path, err)
			}
			bad := idx + int64(gr.records())
			if !last {
				return 0, fmt.Errorf("%w: %s at byte %d (record %d): %v", ErrCorrupt, path, gr.bad, bad, err)
			}
			badEnd := int64(-1)
			if gr.badEnd {
				badEnd = gr.bad
			}
			evidence, serr := tornTail(f, gr.start, size, idx, badEnd)
			if serr != nil {
				return 0, fmt.Errorf("metalog: replay %s: %w", path, serr)
			}
			if evidence != "" {
				return 0, fmt.Errorf("%w: %s at byte %d (record %d): %v; not a torn tail: %s",
					ErrCorrupt, path, gr.bad, bad, err, evidence)
			}
			if err := l.truncateTail(f, path, gr.start, size, gr.bad, err); err != nil {
				return 0, err
			}
			size = gr.start
			break
		}
		for i, body := range bodies {
			if idx >= from {
				if err := fn(idx, body); err != nil {
					return 0, fmt.Errorf("%s at byte %d (record %d): %w", path, gr.frameOffset(i), idx, err)
				}
			}
			idx++
		}
	}
	if last {
		l.size = size
	}
	return idx, nil
}

// tornTail decides whether bad data in the group of the last segment that
// starts at byte start with record first is what a crash left of the last
// group — written by an Append whose fsync never returned, so nothing in
// it was acknowledged — or damage to acknowledged records. badEnd is the
// offset of the bad spot when it is a group end (magic intact), else −1.
// It returns "" for a torn group, else the evidence that the group's fsync
// returned:
//
//   - a later group verifies completely (its group end's own CRC, a start
//     after start, the group CRC over its bytes): it was written, and
//     fsynced, after the bad group, and fsyncs are ordered;
//   - the bad group's own group end (its CRC holds, it names first and
//     reaches back to start; or the bad spot itself, when it is a group
//     end) is followed by more bytes: only a later Append writes past a
//     group end, and it starts only after the previous fsync returned.
//
// Neither can come from a crash during the last Append, whatever order
// the kernel persisted its pages in. The scan reads the segment from
// start once (scanGroupEnds), plus the bytes of each candidate group.
func tornTail(f io.ReaderAt, start, size, first, badEnd int64) (string, error) {
	own := badEnd
	var evidence string
	_, err := scanGroupEnds(f, start, size, func(pos int64, g groupEnd) (bool, error) {
		ok, err := groupVerifies(f, pos, g, start+1)
		if err != nil {
			return false, err
		}
		if ok {
			evidence = fmt.Sprintf("a complete group of %d records from record %d follows it at bytes %d … %d",
				g.count, g.first, g.start(pos), pos+groupEndSize)
			return true, nil
		}
		if own < 0 && g.start(pos) == start && g.first == first {
			own = pos
		}
		return false, nil
	})
	if err != nil {
		return "", err
	}
	if evidence == "" && own >= 0 && own+groupEndSize < size {
		evidence = fmt.Sprintf("its group ends at byte %d and %d more bytes were written after that end",
			own, size-own-groupEndSize)
	}
	return evidence, nil
}

// truncateTail drops the torn group that starts at off (the bad data is
// at bad), fsyncs, and logs what was dropped.
func (l *FileLog) truncateTail(f *os.File, path string, off, size, bad int64, reason error) error {
	if err := f.Truncate(off); err != nil {
		return fmt.Errorf("metalog: truncate torn tail of %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("metalog: truncate torn tail of %s: %w", path, err)
	}
	l.logger.Warn("metalog: truncated torn tail of metadata log (a group whose write never completed)",
		"file", path, "offset", off, "dropped_bytes", size-off, "bad_at", bad, "reason", reason.Error())
	return nil
}

// Append implements Log: one write and one fsync for all bodies, framed
// and followed by a group end (docs/format/metadata-records.md §Group
// end), so that replay keeps the group whole or drops it whole. On failure
// the segment is truncated back to its size before the call. An empty
// bodies writes nothing.
func (l *FileLog) Append(ctx context.Context, bodies [][]byte) error {
	if err := l.failed(); err != nil {
		return err
	}
	if !l.ready {
		return errors.New("metalog: metadata log appended before replay")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(bodies) == 0 {
		return nil
	}
	if uint64(len(bodies)) > math.MaxUint32 {
		return fmt.Errorf("metalog: %d records in one group (limit %d)", len(bodies), uint32(math.MaxUint32))
	}
	buf := l.buf[:0]
	for _, b := range bodies {
		if len(b) == 0 || len(b) > MaxRecordBytes {
			return fmt.Errorf("metalog: metadata record of %d bytes (limit %d)", len(b), MaxRecordBytes)
		}
		buf = appendFrame(buf, b)
	}
	buf = appendGroupEnd(buf, groupEnd{
		count:    uint32(len(bodies)),
		first:    l.next,
		length:   int64(len(buf)),
		groupCRC: crc32.Checksum(buf, castagnoli),
	})
	if cap(buf) <= maxRetainedAppendBuffer {
		l.buf = buf
	} else {
		l.buf = nil
	}
	_, err := l.f.WriteAt(buf, l.size)
	if err == nil {
		err = l.fsync(l.f)
	}
	if err != nil {
		l.undo()
		return fmt.Errorf("metalog: append to metadata log %s: %w", l.f.Name(), err)
	}
	l.size += int64(len(buf))
	l.next += int64(len(bodies))
	return nil
}

// Confirm implements Log: at once, since the caller holds the log's
// directory exclusively, no other writer can take it over; nil unless
// the log was closed or broken.
func (l *FileLog) Confirm(context.Context) error { return l.failed() }

// undo truncates the segment to its last durable size after a failed
// append. If that fails the file's content is unknown: the log breaks.
func (l *FileLog) undo() {
	err := l.f.Truncate(l.size)
	if err == nil {
		err = l.f.Sync()
	}
	if err != nil {
		l.setBroken(fmt.Errorf("metalog: metadata log %s unusable after a failed append: %w", l.f.Name(), err))
		l.logger.Error("metalog: metadata log unusable", "file", l.f.Name(), "err", err)
	}
}

// ReadSnapshot implements Log: the newest snapshot whose checksum
// holds; a damaged one is skipped with a warning, a whole one of an older
// format version refuses the open by name.
func (l *FileLog) ReadSnapshot(ctx context.Context) (int64, []byte, error) {
	if err := l.failed(); err != nil {
		return 0, nil, err
	}
	indexes, err := l.snapshotIndexes()
	if err != nil {
		return 0, nil, err
	}
	for i := len(indexes) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		path := l.snapshotPath(indexes[i])
		data, err := readSnapshotFile(path, indexes[i])
		var old errOldSnapshot
		if errors.As(err, &old) {
			// Skipping it would replay from segments it made obsolete and
			// were deleted: refuse, saying why, rather than report the
			// records missing.
			return 0, nil, fmt.Errorf("%w: %s: snapshot format version %d, this build reads only version %d: the data.dir was written by an older pre-release build; start on a new data.dir",
				ErrCorrupt, path, uint32(old), snapshotFormatVersion)
		}
		if err != nil {
			l.logger.Warn("metalog: skipping unreadable snapshot", "file", path, "err", err)
			continue
		}
		return indexes[i], data, nil
	}
	return 0, nil, nil
}

func (l *FileLog) snapshotIndexes() ([]int64, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("metalog: list snapshots: %w", err)
	}
	var out []int64
	for _, e := range entries {
		if idx, ok := parseIndexName(e.Name(), snapshotSuffix); ok {
			out = append(out, idx)
		}
	}
	slices.Sort(out)
	return out, nil
}

// errOldSnapshot is a whole snapshot (its CRC matches) of an older format
// version.
type errOldSnapshot uint32

func (e errOldSnapshot) Error() string {
	return fmt.Sprintf("snapshot format version %d", uint32(e))
}

func readSnapshotFile(path string, index int64) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < snapshotHeaderSize+4 {
		return nil, errors.New("short snapshot file")
	}
	if string(b[:4]) != snapshotMagic {
		return nil, fmt.Errorf("bad snapshot header %x", b[:8])
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != snapshotFormatVersion {
		end := len(b) - 4
		if v < snapshotFormatVersion && crc32.Checksum(b[:end], castagnoli) == binary.BigEndian.Uint32(b[end:]) {
			return nil, errOldSnapshot(v) // whole, but of an older format
		}
		return nil, fmt.Errorf("bad snapshot header %x", b[:8])
	}
	if got := int64(binary.BigEndian.Uint64(b[8:])); got != index {
		return nil, fmt.Errorf("snapshot header index %d, file name %d", got, index)
	}
	n := binary.BigEndian.Uint64(b[16:])
	if n != uint64(len(b)-snapshotHeaderSize-4) {
		return nil, fmt.Errorf("snapshot data length %d, file holds %d", n, len(b)-snapshotHeaderSize-4)
	}
	end := len(b) - 4
	if crc32.Checksum(b[:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
		return nil, errors.New("snapshot CRC mismatch")
	}
	return b[snapshotHeaderSize:end], nil
}

// PrepareSnapshot implements Log: it starts a new segment at index
// (header written and fsynced, directory fsynced), so that once the
// snapshot is durable the segments before it can be deleted whole.
func (l *FileLog) PrepareSnapshot(ctx context.Context, index int64) error {
	if err := l.failed(); err != nil {
		return err
	}
	if !l.ready || index != l.next {
		return fmt.Errorf("metalog: snapshot at record %d, log is at %d", index, l.next)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	segs, _ := l.segments()
	if segs[len(segs)-1] == index {
		return nil
	}
	return l.createSegment(index)
}

// WriteSnapshot implements Log: it writes the snapshot atomically
// (temporary file, fsync, rename, directory fsync). A segment must start
// at index (PrepareSnapshot). It may run concurrently with Append: it
// never touches the open segment.
func (l *FileLog) WriteSnapshot(ctx context.Context, index int64, data []byte) error {
	segs, broken := l.segments()
	if broken != nil {
		return broken
	}
	if !slices.Contains(segs, index) {
		return fmt.Errorf("metalog: snapshot at record %d: no segment starts there (PrepareSnapshot first)", index)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	path := l.snapshotPath(index)
	b := make([]byte, snapshotHeaderSize, snapshotHeaderSize+len(data)+4)
	copy(b, snapshotMagic)
	binary.BigEndian.PutUint32(b[4:], snapshotFormatVersion)
	binary.BigEndian.PutUint64(b[8:], uint64(index))
	binary.BigEndian.PutUint64(b[16:], uint64(len(data)))
	b = append(b, data...)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if err := fsutil.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	return fsutil.SyncDir(l.dir)
}

// TruncateBefore implements Log: it deletes the segments that hold only
// records below index, then the snapshots older than index, and fsyncs
// the directory. A snapshot at or after index must be on disk. It may run
// concurrently with Append: the open segment is never deleted.
func (l *FileLog) TruncateBefore(ctx context.Context, index int64) error {
	if err := l.failed(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	snaps, err := l.snapshotIndexes()
	if err != nil {
		return err
	}
	if len(snaps) == 0 || snaps[len(snaps)-1] < index {
		return fmt.Errorf("metalog: truncate before record %d: no snapshot at or after it", index)
	}
	// Segments leave the list before their files go: a failed removal
	// leaves an unlisted file that replay skips (it lies wholly before the
	// snapshot) and the first truncation after a restart deletes.
	l.mu.Lock()
	var old []int64
	keep := l.mu.segs[:0]
	for i, base := range l.mu.segs {
		if i+1 < len(l.mu.segs) && l.mu.segs[i+1] <= index {
			old = append(old, base)
			continue
		}
		keep = append(keep, base)
	}
	l.mu.segs = keep
	l.mu.Unlock()
	removed := false
	for _, base := range old {
		if err := os.Remove(l.segmentPath(base)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("metalog: remove old segment: %w", err)
		}
		removed = true
	}
	for _, s := range snaps {
		if s < index {
			if err := os.Remove(l.snapshotPath(s)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("metalog: remove old snapshot: %w", err)
			}
			removed = true
		}
	}
	if removed {
		return fsutil.SyncDir(l.dir)
	}
	return nil
}

// Close implements Log.
func (l *FileLog) Close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	l.setBroken(ErrClosed)
	return err
}
