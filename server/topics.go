package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

// createErrorCode maps an error of Catalog.CreateTopic to the code and
// message a broker would answer (SPEC §12). Unexpected errors are logged and
// answered UNKNOWN_SERVER_ERROR with kerr's generic message, so internal
// details (object-store paths, …) stay in the sidecar's log.
func (s *Server) createErrorCode(name string, err error) (int16, string) {
	var cfgErr *topicconfig.Error
	var kErr *kerr.Error
	switch {
	case errors.As(err, &cfgErr):
		return kerr.InvalidConfig.Code, cfgErr.Error()
	case errors.As(err, &kErr):
		return kErr.Code, err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code, "topic creation did not finish in time"
	default:
		s.rl.Log(context.Background(), slog.LevelWarn, name, "topic creation failed", slog.String("topic", name), slog.Any("err", err))
		return kerr.UnknownServerError.Code, kerr.UnknownServerError.Description
	}
}

// hasCode reports whether err is, or wraps, a *kerr.Error with want's code.
func hasCode(err error, want *kerr.Error) bool {
	var kErr *kerr.Error
	return errors.As(err, &kErr) && kErr.Code == want.Code
}

// topicConfigEntries lists a topic's configs as CreateTopics v5+ returns
// them: the set, values, sources and read-only flags DescribeConfigs
// answers for the topic (describeTopic), as Kafka 4.4 answers both
// (SPEC §6), sorted by name.
func topicConfigEntries(cfg topicconfig.Config) []kmsg.CreateTopicsResponseTopicConfig {
	entries := describeTopic(diskless.Topic{Config: cfg})
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(entries))
	for _, e := range entries {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value, c.Source, c.ReadOnly = e.name, kmsg.StringPtr(e.value), int8(e.source), e.readOnly
		out = append(out, c)
	}
	return out
}

// adminErrorCode maps an error of a topic admin call (DeleteTopic,
// CreatePartitions) to the code and message a broker would answer: a
// *kerr.Error (possibly wrapped) with its code and message, a context
// error REQUEST_TIMED_OUT, anything else UNKNOWN_SERVER_ERROR with kerr's
// generic message (logged).
func (s *Server) adminErrorCode(what, topic string, err error) (int16, string) {
	var kErr *kerr.Error
	switch {
	case errors.As(err, &kErr):
		msg := unwrapKerrMessage(err, kErr)
		return kErr.Code, msg
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code, what + " did not finish in time"
	default:
		s.rl.Log(context.Background(), slog.LevelWarn, topic, what+" failed", slog.String("topic", topic), slog.Any("err", err))
		return kerr.UnknownServerError.Code, kerr.UnknownServerError.Description
	}
}

// unwrapKerrMessage returns the text after the kerr error's own text in
// err's message (the detail the coordinator added, as "CODE: detail"), or
// the code's description when there is none.
func unwrapKerrMessage(err error, kErr *kerr.Error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, kErr.Error()+": "); i >= 0 {
		return msg[i+len(kErr.Error())+2:]
	}
	return kErr.Description
}

// configErrorCode maps an error of Catalog.AlterTopicConfigs: a
// *topicconfig.Error is INVALID_CONFIG (INVALID_REQUEST with Request) with
// its message, the rest as adminErrorCode.
func (s *Server) configErrorCode(topic string, err error) (int16, string) {
	var cfgErr *topicconfig.Error
	if errors.As(err, &cfgErr) {
		if cfgErr.Request {
			return kerr.InvalidRequest.Code, cfgErr.Error()
		}
		if cfgErr.Reason == "unknown topic config" {
			return kerr.InvalidConfig.Code, "Unknown topic config name: " + cfgErr.Name
		}
		return kerr.InvalidConfig.Code, cfgErr.Error()
	}
	return s.adminErrorCode("alter configs", topic, err)
}
