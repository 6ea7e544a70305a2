package sysdb

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// SQLite has no LISTEN/NOTIFY. Writes made through this SQLite announce
// themselves in process, after their commit, to every Listen running on it
// (the engine's waiters wake at once, as on Postgres). Commits by other
// processes on the file are noticed by polling the writer connection's
// PRAGMA data_version, which changes exactly when another connection has
// committed (this process writes only through that connection), and are
// reported as a gap: the listener re-checks everything it waits for.

// Listen implements Notifications.
func (s *SQLite) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string), onGap func()) error {
	sub := s.notes.subscribe(channels)
	defer s.notes.unsubscribe(sub)
	version, _ := s.dataVersion(ctx)
	if onGap != nil {
		onGap()
	}
	ticker := time.NewTicker(s.poll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sub.kick:
			for channel, payloads := range sub.take() {
				for p := range payloads {
					onNotify(channel, p)
				}
			}
		case <-ticker.C:
			v, err := s.dataVersion(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Debug("could not poll the system database file for other writers", zap.Error(err))
				}
				continue
			}
			if v != version {
				version = v
				if onGap != nil {
					onGap()
				}
			}
		}
	}
}

func (s *SQLite) dataVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.w.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
	return v, err
}

// localNotifier fans notifications out to the listeners of one SQLite,
// coalesced per listener: a payload repeated before the listener takes it
// is delivered once, so what is pending is bounded by the distinct payloads
// between two deliveries, whatever the write rate.
type localNotifier struct {
	mu   sync.Mutex
	subs map[*localSubscription]struct{}
}

type localSubscription struct {
	channels map[string]bool
	kick     chan struct{}

	mu      sync.Mutex
	pending map[string]map[string]struct{} // channel → payloads
}

func newLocalNotifier() *localNotifier {
	return &localNotifier{subs: map[*localSubscription]struct{}{}}
}

func (n *localNotifier) subscribe(channels []string) *localSubscription {
	sub := &localSubscription{channels: map[string]bool{}, kick: make(chan struct{}, 1), pending: map[string]map[string]struct{}{}}
	for _, c := range channels {
		sub.channels[c] = true
	}
	n.mu.Lock()
	n.subs[sub] = struct{}{}
	n.mu.Unlock()
	return sub
}

func (n *localNotifier) unsubscribe(sub *localSubscription) {
	n.mu.Lock()
	delete(n.subs, sub)
	n.mu.Unlock()
}

// add announces committed changes on channel to every listener of it.
func (n *localNotifier) add(channel string, payloads ...string) {
	if len(payloads) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for sub := range n.subs {
		if !sub.channels[channel] {
			continue
		}
		sub.mu.Lock()
		set := sub.pending[channel]
		if set == nil {
			set = map[string]struct{}{}
			sub.pending[channel] = set
		}
		for _, p := range payloads {
			set[p] = struct{}{}
		}
		sub.mu.Unlock()
		select {
		case sub.kick <- struct{}{}:
		default:
		}
	}
}

func (sub *localSubscription) take() map[string]map[string]struct{} {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	batch := sub.pending
	sub.pending = map[string]map[string]struct{}{}
	return batch
}

// close drops every subscription: a listener still running gets nothing
// more from this SQLite.
func (n *localNotifier) close() {
	n.mu.Lock()
	n.subs = map[*localSubscription]struct{}{}
	n.mu.Unlock()
}
