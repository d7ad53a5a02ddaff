package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/produce"
	"github.com/diskless-sidecar/sidecar/server"
)

// localSidecar is coordinator.Sidecars for the one sidecar there is today,
// this process (SPEC §10): DisklessDisableTopic is a call. Its produce path
// refuses the topic once its catalog holds DISABLING, its fetch
// long-polls on the topic end at that publication; what confirming adds
// is waiting until the catalog holds it (at once when shard 0 is hosted
// here, which published it before the send), then until every batch it
// accepted before has its answer (produce.Handler.Drain), and dropping
// the topic's cached blocks. The coordinator opens before the produce
// path and the cache exist, so they are bound later (bind); until then a
// send is not confirmed and the coordinator sends again.
type localSidecar struct {
	node  int32
	parts atomic.Pointer[localParts]
}

type localParts struct {
	produce *produce.Handler
	cache   *cache.Cache
	coord   *coordinator.Coordinator
}

var _ coordinator.Sidecars = (*localSidecar)(nil)

func (l *localSidecar) bind(p *produce.Handler, c *cache.Cache, coord *coordinator.Coordinator) {
	l.parts.Store(&localParts{produce: p, cache: c, coord: coord})
}

func (l *localSidecar) Nodes() []int32 { return []int32{l.node} }

func (l *localSidecar) DisableTopic(ctx context.Context, node int32, req diskless.DisableTopicRequest) (diskless.DisableTopicResult, error) {
	if node != l.node {
		return diskless.DisableTopicResult{}, fmt.Errorf("no sidecar %d known (this is %d)", node, l.node)
	}
	return diskless.DisableTopicResult{}, l.disableSelf(ctx, req)
}

// disableSelf is this sidecar's part of a disablement: it waits until
// its catalog holds the disablement (coordinator.AwaitDisablement — its
// replica of shard 0's may be a moment behind, or far behind on a
// sidecar just started), so that every produce request and commit group
// here after it refuses the topic, then for the produce requests
// accepted before (the order matters: Drain waits only for those), then
// drops the topic's cached blocks. ctx bounds it (the request's
// TimeoutMs): past it the error means "not confirmed", and the driver
// sends again on its next pass.
func (l *localSidecar) disableSelf(ctx context.Context, req diskless.DisableTopicRequest) error {
	p := l.parts.Load()
	if p == nil {
		return errors.New("the sidecar is still starting")
	}
	if err := p.coord.AwaitDisablement(ctx, req); err != nil {
		return err
	}
	if err := p.produce.Drain(ctx); err != nil {
		return fmt.Errorf("waiting for the produce requests accepted before: %w", err)
	}
	p.cache.Drop(p.coord.TopicObjectKeys(req.TopicID))
	return nil
}

// Self is this sidecar's own part of a disablement as the server's
// DisklessDisableTopic handler (API key 109) takes it.
func (l *localSidecar) Self() server.TopicDisabler { return selfDisabler{l} }

type selfDisabler struct{ l *localSidecar }

func (s selfDisabler) DisableTopic(ctx context.Context, req diskless.DisableTopicRequest) error {
	return s.l.disableSelf(ctx, req)
}
