package upload

import (
	"sync/atomic"
	"time"
)

// Stats counts an Uploader's work since New. The fields are updated
// atomically and may be read at any time; internal/telemetry exports them
// as OpenTelemetry metrics (DESIGN §Observability).
type Stats struct {
	// Attempts counts Put calls made to the store, retries and hedges
	// included.
	Attempts atomic.Int64
	// Retries counts attempts after the first of an object.
	Retries atomic.Int64
	// Uploads counts objects uploaded successfully.
	Uploads atomic.Int64
	// Failures counts Upload calls that returned an error.
	Failures atomic.Int64
	// BytesUploaded counts the bytes of objects uploaded successfully,
	// each object once however many attempts it took.
	BytesUploaded atomic.Int64
	// Hedges counts second attempts started beside a slow one, under a
	// new key: the extra PUTs hedging costs (Hedges / Uploads is their
	// share).
	Hedges atomic.Int64
	// HedgeWins counts uploads whose hedge stored its object first.
	HedgeWins atomic.Int64
	// HedgeDeletes counts losing attempts' keys deleted; HedgeDeleteFailures
	// those whose Delete failed, left to the orphan scan.
	HedgeDeletes, HedgeDeleteFailures atomic.Int64

	// hedgeDelay is the current hedge delay; nil without hedging.
	hedgeDelay func() time.Duration
}

// HedgeDelay returns how long an upload attempt runs before it is hedged
// now, 0 when hedging is off.
func (s *Stats) HedgeDelay() time.Duration {
	if s.hedgeDelay == nil {
		return 0
	}
	return s.hedgeDelay()
}
