package server

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/sasl"
)

// alterUserScramCredentialsVersions: AlterUserScramCredentials 0, all of
// Kafka 4.x's (KIP-554).
var alterUserScramCredentialsVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 51, MinVersion: 0, MaxVersion: 0}

// handleAlterUserScramCredentials answers AlterUserScramCredentials
// (KIP-554; SPEC §14, SCRAM) as Kafka's controller decides it, at the
// controller in a cluster (forwarded). Per user, deletions first, then
// upsertions: a user named a second time in the request (as deletion or
// upsertion) gets DUPLICATE_RESOURCE "A user credential cannot be altered
// twice in the same request" and none of its changes apply; an empty name
// UNACCEPTABLE_CREDENTIAL "Username must not be empty"; a mechanism other
// than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512) UNSUPPORTED_SASL_MECHANISM
// "Unknown SCRAM mechanism"; iterations below 4096 or above 16384
// UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too many iterations";
// the deletion of a credential not held RESOURCE_NOT_FOUND "Attempt to
// delete a user credential that does not exist", decided as the deletion
// is read against the credentials held before the request, so that the
// user's later changes are not read (the credential store checks again
// when it writes: one removed meanwhile is answered the same). The
// sidecar's own bounds (docs/format/metadata-records.md §Limits) refuse
// a name or salt over 1024 bytes, an empty salt and a name that is not
// UTF-8 with UNACCEPTABLE_CREDENTIAL. The accepted changes are written together
// (one group of records 116 on shard 0): StoredKey and ServerKey derived
// from the salted password, which is not kept.
func (s *Server) handleAlterUserScramCredentials(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	if fwd, ok := s.forwardAdmin(ctx, req); ok {
		return fwd // credentials are written at the controller
	}
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	type failure struct {
		code int16
		msg  string
	}
	var (
		order   []string // users in the order first named
		failed  = map[string]failure{}
		changes = map[string]diskless.ScramChange{}
		held    map[string][]diskless.ScramCredential
	)
	if s.cfg.Scram != nil {
		held = s.cfg.Scram.ScramUsers()
	}
	fail := func(user string, code int16, msg string) {
		if _, ok := failed[user]; !ok {
			failed[user] = failure{code, msg}
		}
	}
	add := func(user string, mech int8, iterations int32, salt, salted []byte, remove bool) {
		if _, ok := failed[user]; ok {
			return
		}
		if _, ok := changes[user]; ok {
			delete(changes, user)
			fail(user, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
			return
		}
		order = append(order, user)
		m := diskless.ScramMechanism(mech)
		switch {
		case user == "":
			fail(user, kerr.UnacceptableCredential.Code, "Username must not be empty")
			return
		case m.KeySize() == 0:
			fail(user, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
			return
		case !diskless.ValidScramUser(user):
			fail(user, kerr.UnacceptableCredential.Code, "Username must be UTF-8 of at most 1024 bytes")
			return
		}
		ch := diskless.ScramChange{User: user, Remove: remove, Credential: diskless.ScramCredential{Mechanism: m}}
		if remove && !slices.ContainsFunc(held[user], func(c diskless.ScramCredential) bool { return c.Mechanism == m }) {
			// Refused as it is read, as Kafka's controller refuses it:
			// the user's later changes are not read.
			fail(user, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			return
		}
		if !remove {
			switch {
			case iterations < diskless.MinScramIterations:
				fail(user, kerr.UnacceptableCredential.Code, "Too few iterations")
				return
			case iterations > diskless.MaxScramIterations:
				fail(user, kerr.UnacceptableCredential.Code, "Too many iterations")
				return
			case len(salt) == 0 || len(salt) > diskless.MaxScramSaltBytes:
				fail(user, kerr.UnacceptableCredential.Code, "The salt must be 1 to 1024 bytes")
				return
			}
			stored, server := sasl.ScramKeys(m, salted)
			ch.Credential = diskless.ScramCredential{Mechanism: m, Iterations: iterations, Salt: salt, StoredKey: stored, ServerKey: server}
		}
		changes[user] = ch
	}
	for _, d := range req.Deletions {
		add(d.Name, d.Mechanism, 0, nil, nil, true)
	}
	for _, u := range req.Upsertions {
		add(u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword, false)
	}
	var batch []diskless.ScramChange
	for _, u := range order {
		if ch, ok := changes[u]; ok {
			if _, bad := failed[u]; !bad {
				batch = append(batch, ch)
			}
		}
	}
	if len(batch) > 0 {
		var (
			results []error
			err     error
		)
		if s.cfg.Scram == nil {
			err = errors.New("no SCRAM credential store")
		} else {
			results, err = s.cfg.Scram.AlterScramCredentials(ctx, batch)
		}
		for i, ch := range batch {
			switch {
			case err != nil:
				code, msg := s.scramErrorCode(err)
				fail(ch.User, code, msg)
			case results[i] != nil:
				fail(ch.User, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			}
		}
	}
	// Successes first (deletions, then upsertions, as Kafka lists them),
	// then the failures, each in request order.
	for _, remove := range []bool{true, false} {
		for _, ch := range batch {
			if _, bad := failed[ch.User]; !bad && ch.Remove == remove {
				r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				r.User = ch.User
				resp.Results = append(resp.Results, r)
			}
		}
	}
	for _, u := range order {
		if f, bad := failed[u]; bad {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode, r.ErrorMessage = u, f.code, kmsg.StringPtr(f.msg)
			resp.Results = append(resp.Results, r)
			delete(failed, u) // a user named again is listed once
		}
	}
	return resp
}

// scramErrorCode maps a failure of the credential store to the code a
// broker would answer (adminStoreError).
func (s *Server) scramErrorCode(err error) (int16, string) {
	return s.adminStoreError("altering SCRAM credentials", err)
}

// adminStoreError maps a failure of shard 0's admin stores (SCRAM
// credentials, ACLs) doing what to the code a broker would answer:
// NOT_CONTROLLER where another sidecar writes them now (clients retry),
// REQUEST_TIMED_OUT for a context error, else UNKNOWN_SERVER_ERROR
// (logged, rate-limited).
func (s *Server) adminStoreError(what string, err error) (int16, string) {
	switch {
	case errors.Is(err, diskless.ErrNotCoordinator):
		return kerr.NotController.Code, kerr.NotController.Description
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code, "the change did not finish in time"
	default:
		s.rl.Log(context.Background(), slog.LevelWarn, what, what+" failed", slog.Any("err", err))
		return kerr.UnknownServerError.Code, kerr.UnknownServerError.Description
	}
}
