package diskless

import "fmt"

// FileState is what one shard knows of an object (DescribeFiles, SPEC §9).
type FileState int8

// File states, in lifecycle order.
const (
	// FileUnknown: the shard never committed a batch of the object, or
	// closed it and has since forgotten it.
	FileUnknown FileState = iota
	// FileLive: some of the shard's batches in the object are still in a
	// partition index (HasLiveBatches in KIP-1164's DescribeFiles).
	FileLive
	// FileReleased: none is left; the shard has not closed its reference
	// yet.
	FileReleased
	// FileClosed: the shard is done with the object (record 106): it
	// deleted it, or left that to a lower owner that also committed it.
	// Answered until the shard forgets the file, then FileUnknown.
	FileClosed
)

func (fs FileState) String() string {
	switch fs {
	case FileUnknown:
		return "unknown"
	case FileLive:
		return "live"
	case FileReleased:
		return "released"
	case FileClosed:
		return "closed"
	}
	return fmt.Sprintf("FileState(%d)", int8(fs))
}
