package sysdb

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// renameSource matches the rows a rename moves: $1's ($1 NULL matches none
// by name) and, when $2, the unclaimed ones. Unlike the listing filters,
// unclaimed rows are not implied: they move only when asked.
const renameSource = "(application_name = $1::text OR ($2::boolean AND application_name IS NULL))"

// ApplicationRename implements QueueSystem, as DBOS's rename_application
// moves rows: the control plane (queues, schedules, versions) and the
// active workflows at once, since an application owning half of them
// dequeues work whose version it can no longer see; then the terminal
// workflows and the steps, which only scope listings and garbage
// collection, in batches so that a long history is not one transaction.
func (p *Postgres) ApplicationRename(ctx context.Context, in ApplicationRenameParams) (ApplicationRowCounts, error) {
	var out ApplicationRowCounts
	args := []any{in.OldName, in.AdoptUnclaimed, in.NewName}
	err := p.retry(ctx, "rename application", func(ctx context.Context) error {
		out = ApplicationRowCounts{}
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			for _, t := range []struct {
				table, extra string
				n            *int64
			}{
				{"queues", "", &out.Queues},
				{"workflow_schedules", "", &out.Schedules},
				{"application_versions", "", &out.Versions},
				{"workflow_status", " AND status IN ('" + StatusPending + "', '" + StatusEnqueued + "', '" + StatusDelayed + "')", &out.Workflows},
			} {
				tag, err := tx.Exec(ctx, "UPDATE "+p.table(t.table)+" SET application_name = $3 WHERE "+renameSource+t.extra, args...)
				if err != nil {
					return err
				}
				*t.n = tag.RowsAffected()
			}
			return nil
		})
	})
	if err != nil {
		return ApplicationRowCounts{}, err
	}
	terminal, err := p.renameInBatches(ctx, "workflow_status", in)
	if err != nil {
		return ApplicationRowCounts{}, err
	}
	out.Workflows += terminal
	if out.Steps, err = p.renameInBatches(ctx, "operation_outputs", in); err != nil {
		return ApplicationRowCounts{}, err
	}
	return out, nil
}

// renameInBatches re-owns a table's matching rows in ranges of workflow
// ids, each at most in.BatchSize workflows: ranges rather than LIMIT, so a
// batch never rescans the rows the previous ones moved (they no longer
// match), and a workflow's rows are never split across batches. The last
// batch drops the lower bound, so rows written below it meanwhile move too.
func (p *Postgres) renameInBatches(ctx context.Context, table string, in ApplicationRenameParams) (int64, error) {
	update := "UPDATE " + p.table(table) + " SET application_name = $3 WHERE " + renameSource
	args := []any{in.OldName, in.AdoptUnclaimed, in.NewName}
	if in.BatchSize <= 0 {
		var n int64
		err := p.retry(ctx, "rename application in "+table, func(ctx context.Context) error {
			tag, err := p.pool.Exec(ctx, update, args...)
			n = tag.RowsAffected()
			return err
		})
		return n, err
	}
	upperQuery := "SELECT DISTINCT workflow_uuid FROM " + p.table(table) + " WHERE " + renameSource +
		" AND ($3::text IS NULL OR workflow_uuid > $3) ORDER BY workflow_uuid LIMIT 1 OFFSET $4"
	var total int64
	var watermark *string
	for {
		var upper *string
		var moved int64
		err := p.retry(ctx, "rename application in "+table, func(ctx context.Context) error {
			return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
				upper = nil
				err := tx.QueryRow(ctx, upperQuery, in.OldName, in.AdoptUnclaimed, watermark, in.BatchSize-1).Scan(&upper)
				if err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				q, a := update, args
				if upper != nil {
					q += " AND ($4::text IS NULL OR workflow_uuid > $4) AND workflow_uuid <= $5"
					a = append(append([]any{}, args...), watermark, *upper)
				}
				tag, err := tx.Exec(ctx, q, a...)
				moved = tag.RowsAffected()
				return err
			})
		})
		if err != nil {
			return total, err
		}
		total += moved
		if upper == nil {
			return total, nil
		}
		watermark = upper
	}
}
