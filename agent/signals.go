package agent

import (
	"context"
	"sync"
	"time"
)

// signals wakes requests waiting for a message, an event or a stream value.
// A key is a notification channel's payload prefixed by the kind of wait
// (see messageKey, eventKey, streamKey). Three sources wake them: writes made
// through this agent (at once, before the NOTIFY comes back), the database's
// notifications (writes by other agents and by the DBOS SDKs), and one
// shared fallback tick that wakes every waiter to re-check (a writer that
// does not notify, such as an old SDK). There is never one poll loop per
// waiter.
type signals struct {
	fallback time.Duration

	mu    sync.Mutex
	byKey map[string]map[chan struct{}]struct{}
}

func newSignals(fallback time.Duration) *signals {
	return &signals{fallback: fallback, byKey: map[string]map[chan struct{}]struct{}{}}
}

func messageKey(destinationID, topic string) string { return "m:" + destinationID + "::" + topic }
func eventKey(workflowID, key string) string        { return "e:" + workflowID + "::" + key }
func streamKey(workflowID, key string) string       { return "s:" + workflowID + "::" + key }

// subscribe returns a channel signalled whenever key may have changed (at
// most one signal is buffered) and the function that unsubscribes it.
// Subscribe before the first check, so that no change is missed between the
// check and the wait.
func (s *signals) subscribe(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	set := s.byKey[key]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		s.byKey[key] = set
	}
	set[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(set, ch)
		if len(s.byKey[key]) == 0 {
			delete(s.byKey, key)
		}
		s.mu.Unlock()
	}
}

func (s *signals) wake(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.byKey[key] {
		notify(ch)
	}
}

func (s *signals) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, set := range s.byKey {
		for ch := range set {
			notify(ch)
		}
	}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (s *signals) start(sup *supervisor) {
	sup.goCtx("signal fallback tick", func(ctx context.Context) {
		everyTick(ctx, s.fallback, func(context.Context) { s.wakeAll() })
	})
}

// awaitCondition runs check until it reports true, then returns true; or
// returns false once deadline passes (the zero deadline never passes). It
// re-checks whenever one of wake signals. ctx ending is its error.
func awaitCondition(ctx context.Context, deadline time.Time, check func(context.Context) (bool, error), wake ...<-chan struct{}) (bool, error) {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	var second <-chan struct{}
	if len(wake) > 1 {
		second = wake[1]
	}
	for {
		ok, err := check(ctx)
		if err != nil || ok {
			return ok, err
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-timeout:
			// One last look: the condition may have come with the deadline.
			return check(ctx)
		case <-wake[0]:
		case <-second:
		}
	}
}
