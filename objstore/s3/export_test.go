package s3

// SetListPageSize makes List ask for n keys per page, so that tests
// exercise pagination with few objects.
func (s *Store) SetListPageSize(n int32) { s.pageSize = n }
