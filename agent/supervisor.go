package agent

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
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

	// Every request starts a goroutine here, so a start costs no
	// exclusive lock: starts share mu (a read lock, so that stop, which
	// takes it alone, sees every start that passed the stopped check in
	// wg), and counts are atomics kept per name.
	mu      sync.RWMutex
	wg      sync.WaitGroup
	stopped bool
	// running counts the live goroutines by name (*atomic.Int64), for
	// stop's report and for Agent.Goroutines. The names are a fixed set
	// of this package's constants, so the map stays small.
	running sync.Map
}

func newSupervisor() *supervisor {
	ctx, cancel := context.WithCancel(context.Background())
	return &supervisor{ctx: ctx, cancel: cancel}
}

func (s *supervisor) counter(name string) *atomic.Int64 {
	if c, ok := s.running.Load(name); ok {
		return c.(*atomic.Int64)
	}
	c, _ := s.running.LoadOrStore(name, new(atomic.Int64))
	return c.(*atomic.Int64)
}

// goCtx runs fn(ctx) in a goroutine tracked under name; ctx ends when the
// supervisor stops. It reports false (and runs nothing) once stop began:
// nothing new starts during a shutdown.
func (s *supervisor) goCtx(name string, fn func(ctx context.Context)) bool {
	s.mu.RLock()
	if s.stopped {
		s.mu.RUnlock()
		return false
	}
	s.wg.Add(1)
	s.mu.RUnlock()
	count := s.counter(name)
	count.Add(1)
	go func() {
		defer s.wg.Done()
		defer count.Add(-1)
		fn(s.ctx)
	}()
	return true
}

// goFn is goCtx for a function that takes its context from elsewhere.
func (s *supervisor) goFn(name string, fn func()) bool {
	return s.goCtx(name, func(context.Context) { fn() })
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

// snapshot returns the live goroutines by name (names with none left are
// omitted).
func (s *supervisor) snapshot() map[string]int {
	out := map[string]int{}
	s.running.Range(func(name, c any) bool {
		if n := c.(*atomic.Int64).Load(); n > 0 {
			out[name.(string)] = int(n)
		}
		return true
	})
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
