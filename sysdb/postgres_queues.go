package sysdb

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// QueueList implements SystemDatabase.
func (p *Postgres) QueueList(ctx context.Context) ([]QueueSummary, error) {
	var out []QueueSummary
	err := p.retry(ctx, "list queues", func(ctx context.Context) error {
		rows, err := p.pool.Query(ctx, p.sql("QueueList"))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueSummary, error) {
			var q QueueSummary
			var concurrency, workerConcurrency, rateMax *int32
			err := r.Scan(&q.Name, &q.Registered, &concurrency, &workerConcurrency, &rateMax, &q.RateLimitPeriodSec,
				&q.PriorityEnabled, &q.PartitionQueue, &q.ApplicationName, &q.Enqueued, &q.Pending, &q.Delayed)
			q.Concurrency, q.WorkerConcurrency, q.RateLimitMax = intPtr(concurrency), intPtr(workerConcurrency), intPtr(rateMax)
			return q, err
		})
		return err
	})
	return out, err
}

func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}
