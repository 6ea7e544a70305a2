package agent

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// supervisor owns every goroutine the engine starts: the long-running
// services (batchers, waiters, signals, listener, pollers, sweeper,
// scheduler, rescuer) and the short-lived ones (a request being handled, a
// hand-back, a check of a local run). Each starts through go, so that stop
// can end them all and say by name which did not end in time. There is no
// bare `go` statement elsewhere in this package.
//
// The model is River's startstop: one shape for every service, and one
// owner that waits for them.
type supervisor struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	wg      sync.WaitGroup
	stopped bool
	// running counts the live goroutines by name, for stop's report and
	// for tests (Agent.Goroutines).
	running map[string]int
}

func newSupervisor() *supervisor {
	ctx, cancel := context.WithCancel(context.Background())
	return &supervisor{ctx: ctx, cancel: cancel, running: map[string]int{}}
}

// goCtx runs fn(ctx) in a goroutine tracked under name; ctx ends when the
// supervisor stops. It reports false (and runs nothing) once stop began:
// nothing new starts during a shutdown.
func (s *supervisor) goCtx(name string, fn func(ctx context.Context)) bool {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return false
	}
	s.running[name]++
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.done(name)
		fn(s.ctx)
	}()
	return true
}

// goFn is goCtx for a function that takes its context from elsewhere.
func (s *supervisor) goFn(name string, fn func()) bool {
	return s.goCtx(name, func(context.Context) { fn() })
}

func (s *supervisor) done(name string) {
	s.mu.Lock()
	if s.running[name]--; s.running[name] <= 0 {
		delete(s.running, name)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// everyTick calls fn every interval until ctx ends: the loop of every
// periodic service.
func everyTick(ctx context.Context, interval time.Duration, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

// snapshot returns the live goroutines by name.
func (s *supervisor) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.running))
	for k, v := range s.running {
		out[k] = v
	}
	return out
}

// stop ends the supervisor's context and waits for every goroutine until
// deadline. It returns what was still running then (empty when all ended),
// as "name×count" sorted, for the log.
func (s *supervisor) stop(deadline time.Duration) []string {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	finished := make(chan struct{})
	go func() { // not tracked: it is the wait for the tracked ones
		s.wg.Wait()
		close(finished)
	}()
	t := time.NewTimer(deadline)
	defer t.Stop()
	select {
	case <-finished:
		return nil
	case <-t.C:
	}
	left := s.snapshot()
	out := make([]string, 0, len(left))
	for name, n := range left {
		out = append(out, fmt.Sprintf("%s×%d", name, n))
	}
	sort.Strings(out)
	return out
}
