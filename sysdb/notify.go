package sysdb

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// Notification channels. The first three are the DBOS SDKs' own; the last two
// are the agent's, NOTIFYed right after a workflow's outcome or new queued
// work commits so that other agents wake at once (the SDKs poll).
const (
	ChannelNotifications  = "dbos_notifications_channel"
	ChannelWorkflowEvents = "dbos_workflow_events_channel"
	ChannelStreams        = "dbos_streams_channel"
	ChannelWorkflowStatus = "dbos_agent_workflow_status"
	// ChannelQueue is NOTIFYed, with the queue's name as payload, after a
	// commit that makes work available on a queue (an enqueue, a delayed
	// workflow released, a resume, a hand-back): pollers on every agent
	// wake at once instead of at their next poll. The DBOS SDKs do not
	// notify; their enqueues are found by polling.
	ChannelQueue = "dbos_agent_queue"
)

// Notifications delivers database change notifications.
type Notifications interface {
	// Listen calls onNotify for each notification on channels until ctx
	// ends, on one dedicated connection, reconnecting with backoff when it
	// breaks. onGap is called after every (re)connection: notifications
	// sent while disconnected are lost, so the caller re-checks what it
	// waits for. Listen returns ctx's error.
	Listen(ctx context.Context, channels []string, onNotify func(channel, payload string), onGap func()) error
}

var _ Notifications = (*Postgres)(nil)

// Listen implements Notifications.
func (p *Postgres) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string), onGap func()) error {
	backoff := 100 * time.Millisecond
	for {
		err := p.listenOnce(ctx, channels, onNotify, onGap)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.log.Warn("notification listener disconnected, reconnecting",
			zap.Error(redactErr(err)), zap.Duration("backoff", backoff))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (p *Postgres) listenOnce(ctx context.Context, channels []string, onNotify func(channel, payload string), onGap func()) error {
	// A connection of its own, outside the pool: it blocks waiting and must
	// not be handed to anyone else while LISTENing.
	conn, err := pgx.ConnectConfig(ctx, p.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	if onGap != nil {
		onGap()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return ctx.Err()
			}
			return err
		}
		onNotify(n.Channel, n.Payload)
	}
}

// notifier sends the agent's own notifications after the writes they
// announce have committed, coalesced, from one statement at a time. A NOTIFY
// inside a writing transaction takes Postgres' database-wide notification
// lock until that commit is durable, which serialises every such commit and
// keeps them from sharing disk flushes; the DBOS SDKs moved their event and
// stream notifications after commit for the same reason. If the agent dies
// between a commit and its notification, other agents' fallback polls find
// the change.
type notifier struct {
	pool *pgxpool.Pool
	log  *zap.Logger

	mu      sync.Mutex
	pending map[string]map[string]struct{} // channel → payloads
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func newNotifier(pool *pgxpool.Pool, log *zap.Logger) *notifier {
	n := &notifier{pool: pool, log: log, pending: map[string]map[string]struct{}{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go n.loop()
	return n
}

// add queues notifications; payloads repeated before the next flush are sent
// once.
func (n *notifier) add(channel string, payloads ...string) {
	if len(payloads) == 0 {
		return
	}
	n.mu.Lock()
	set := n.pending[channel]
	if set == nil {
		set = map[string]struct{}{}
		n.pending[channel] = set
	}
	for _, p := range payloads {
		set[p] = struct{}{}
	}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *notifier) loop() {
	defer close(n.done)
	for {
		select {
		case <-n.kick:
			n.flush()
		case <-n.stop:
			n.flush() // what was committed before Close still announces itself
			return
		}
	}
}

func (n *notifier) flush() {
	n.mu.Lock()
	batch := n.pending
	n.pending = map[string]map[string]struct{}{}
	n.mu.Unlock()
	for channel, set := range batch {
		payloads := make([]string, 0, len(set))
		for p := range set {
			payloads = append(payloads, p)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := n.pool.Exec(ctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", channel, payloads)
		cancel()
		if err != nil {
			// Listeners fall back to polling; nothing is lost but time.
			n.log.Debug("notification not sent", zap.String("channel", channel), zap.Error(redactErr(err)))
		}
	}
}

func (n *notifier) close() {
	close(n.stop)
	<-n.done
}
