package s3

import "time"

// SetListPageSize makes List ask for n keys per page, so that tests
// exercise pagination with few objects.
func (s *Store) SetListPageSize(n int32) { s.pageSize = n }

// SetStaleSweepRetries replaces SweepStaleUploads' attempts and backoff, so
// that tests of its retries do not wait minutes.
func (s *Store) SetStaleSweepRetries(attempts int, initial, maxBackoff time.Duration) {
	s.sweep.attempts, s.sweep.initial, s.sweep.maxBackoff = attempts, initial, maxBackoff
}
