package upload

import "sync/atomic"

// Stats counts an Uploader's work since New. The fields are updated
// atomically and may be read at any time; internal/telemetry exports them
// as OpenTelemetry metrics (DESIGN §Observability).
type Stats struct {
	// Attempts counts Put calls made to the store, retries included.
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
}
