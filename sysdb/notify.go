package sysdb

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Notification channels. The first three are the DBOS SDKs' own; the last is
// the agent's, NOTIFYed in the same transaction as a workflow's outcome so
// that waiters on other agents wake at once (the SDKs poll for outcomes).
const (
	ChannelNotifications  = "dbos_notifications_channel"
	ChannelWorkflowEvents = "dbos_workflow_events_channel"
	ChannelStreams        = "dbos_streams_channel"
	ChannelWorkflowStatus = "dbos_agent_workflow_status"
	// ChannelQueue is NOTIFYed, with the queue's name as payload, in the
	// transaction that makes work available on a queue (an enqueue, a
	// delayed workflow released, a resume, a hand-back): pollers on every
	// agent wake at once instead of at their next poll. The DBOS SDKs do
	// not notify; their enqueues are found by polling.
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
