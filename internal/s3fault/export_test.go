package s3fault

import "time"

// Draw is one draw of m for kind, for the tests of the distribution.
func Draw(m *LatencyModel, kind Kind) time.Duration { return m.draw(kind) }
