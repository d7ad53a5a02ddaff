// Package server is the sidecar's Kafka listener: it accepts TCP
// connections, frames and decodes Kafka requests with franz-go's kmsg,
// dispatches them by API key (one file per key, named after the key number)
// and writes the responses back in request order.
//
// # Wire format (Kafka protocol)
//
// Every request and response is a frame: a 4-byte big-endian size, then that
// many bytes. A request frame holds
//
//	int16  api key
//	int16  api version
//	int32  correlation id
//	string client id (int16 length, −1 = null)
//	tagged fields (uvarint count, …), only for flexible versions (header v2)
//	request body (kmsg.Request.ReadFrom at that version)
//
// and a response frame holds the correlation id, an empty tagged-field
// section for flexible versions (header v1), then the body
// (kmsg.Response.AppendTo). ApiVersions is the exception: its response header
// is always v0, and a request with a version this server does not know is
// answered with a v0 body carrying UNSUPPORTED_VERSION and ApiVersions' own
// range (SPEC §6), so that the client retries with a version it shares.
//
// Frames smaller than 8 bytes or larger than Config.MaxRequestBytes, headers
// or bodies that do not decode, unknown API keys and unsupported versions of
// any other API close that connection only (logged at info). A panic while
// handling a request is recovered, logged at error with its stack, and
// closes that connection only.
//
// # Goroutines
//
// The Server owns, per connection, one reader and one writer goroutine; both
// are started by Serve and joined before Serve (and Shutdown) return. The
// reader reads and decodes requests and, in request order:
//   - calls Producer.Produce itself, so appends keep the connection's order,
//     and queues the returned wait func;
//   - starts one goroutine per other request (Fetch may long-poll) and queues
//     its completion.
//
// The writer takes the queue in order, waits for each response and writes
// it, so responses leave in request order however the handlers interleave.
// Handler goroutines are joined by the writer, which waits for every queued
// request even after the connection failed. The queue is bounded by
// Config.MaxInflightPerConn: the reader waits before reading a request when
// that many are in flight (read but not yet answered), which pushes back on
// the client through TCP.
//
// Each connection has a context: canceled when the connection fails (read or
// write error, malformed input, panic) or when the server is stopped hard
// (Serve's context canceled, or Shutdown's deadline passed). Handlers get it
// and must return promptly once it is done.
//
// # Stopping
//
// Shutdown stops accepting, stops every reader (pending reads are
// interrupted with a read deadline), lets the writers answer every request
// already read, then closes the connections. Canceling Serve's context
// instead closes everything at once.
package server
