package objstore

// SetListPageSize makes List ask for n keys per page, so that tests
// exercise pagination with few objects.
func (s *S3) SetListPageSize(n int32) { s.pageSize = n }
