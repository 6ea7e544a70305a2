package agent

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// Readiness is whether the engine can serve: its database answers and its
// notification listener has connected. Migrations need no check of their
// own: an engine exists only once they ran (hosting.Start migrates first).
type Readiness struct {
	DatabaseReachable bool
	// DatabaseError is why the database did not answer ("" when it did).
	DatabaseError     string
	ListenerConnected bool
	Draining          bool
	Deactivated       bool
}

// Ready reports whether the engine is ready to serve.
func (r Readiness) Ready() bool {
	return r.DatabaseReachable && r.ListenerConnected && !r.Draining && !r.Deactivated
}

// readinessProbeID is a workflow id no one creates: reading it is one
// primary-key lookup that proves the database answers.
const readinessProbeID = "dbos-agent-readiness-probe"

// Readiness probes the database (bounded by ctx: an unreachable database is
// retried until ctx ends) and reports the listener's state.
func (a *Agent) Readiness(ctx context.Context) Readiness {
	r := Readiness{
		ListenerConnected: a.cfg.Notifications == nil || a.listenerConnected.Load(),
		Draining:          a.draining.Load(),
		Deactivated:       a.deactivated.Load(),
	}
	_, err := a.db.WorkflowGet(ctx, readinessProbeID)
	var notFound *sysdb.NotFoundError
	switch {
	case err == nil, errors.As(err, &notFound):
		r.DatabaseReachable = true
	default:
		r.DatabaseError = err.Error()
	}
	return r
}

// RecoverExecutors puts the unfinished workflows of these executors (of
// another agent or SDK process that died) back on their queues, as DBOS's
// admin workflow recovery does, and returns their ids.
func (a *Agent) RecoverExecutors(ctx context.Context, executorIDs []string) ([]string, error) {
	if len(executorIDs) == 0 {
		return nil, invalidf("recover: executor ids are required")
	}
	ids, err := a.db.WorkflowRecover(ctx, sysdb.WorkflowRecoverParams{ExecutorIDs: executorIDs})
	if err != nil {
		return nil, err
	}
	a.counters.workflowsRecovered.Add(uint64(len(ids)))
	if len(ids) > 0 {
		a.wakeAllPollers()
	}
	return ids, nil
}

// Deactivate stops this agent firing schedules, as DBOS's admin deactivate
// stops an executor's schedulers when it is being replaced (a new version
// takes over); its workflows run on, and readiness reports it, so a load
// balancer sends new traffic elsewhere. It reports whether this call
// deactivated it (false: it already was).
func (a *Agent) Deactivate() bool {
	if !a.deactivated.CompareAndSwap(false, true) {
		return false
	}
	a.log.Info("deactivated: this agent fires no more schedules", zap.String("executor_id", a.cfg.ExecutorID))
	a.schedules.reconcileSoon()
	return true
}

// terminalStatuses are the statuses of workflows that will not run again
// unless resumed or forked.
var terminalStatuses = []string{sysdb.StatusSuccess, sysdb.StatusError, sysdb.StatusCancelled, sysdb.StatusMaxRecoveryAttemptsExceeded}

// cleanupPage is how many workflows a timeout or collection handles per
// listing.
const cleanupPage = 1000

// CancelOlderThan cancels every PENDING, ENQUEUED or DELAYED workflow
// created before cutoff, as DBOS's global timeout does, and returns how
// many it cancelled.
func (a *Agent) CancelOlderThan(ctx context.Context, cutoff time.Time) (int, error) {
	cancelled := 0
	for {
		wfs, err := a.db.WorkflowList(ctx, sysdb.WorkflowListParams{
			Statuses:      []string{sysdb.StatusPending, sysdb.StatusEnqueued, sysdb.StatusDelayed},
			CreatedBefore: optionalEpoch(cutoff), Limit: cleanupPage,
		})
		if err != nil {
			return cancelled, err
		}
		for _, wf := range wfs {
			if _, err := a.Cancel(ctx, CancelParams{WorkflowID: wf.ID}); err != nil {
				var notFound *sysdb.NotFoundError
				if !errors.As(err, &notFound) { // deleted meanwhile: nothing to cancel
					return cancelled, err
				}
			}
			cancelled++
		}
		// Cancelled rows leave the listing, so the next page starts over.
		if len(wfs) < cleanupPage {
			return cancelled, nil
		}
	}
}

// GarbageCollectParams bound DBOS's garbage collection: finished workflows
// created before Cutoff go, and beyond the newest RowsThreshold workflows
// the older finished ones go too. Nil bounds nothing.
type GarbageCollectParams struct {
	Cutoff        *time.Time
	RowsThreshold *int
}

// GarbageCollect deletes finished workflows (with their steps, events and
// messages) older than the bounds, as DBOS's garbage collection does; active
// workflows stay. It returns how many it deleted.
func (a *Agent) GarbageCollect(ctx context.Context, p GarbageCollectParams) (int, error) {
	var cutoff *int64
	if p.Cutoff != nil {
		cutoff = optionalEpoch(*p.Cutoff)
	}
	if p.RowsThreshold != nil {
		if *p.RowsThreshold < 0 {
			return 0, invalidf("garbage collect: rows_threshold must not be negative")
		}
		// The newest RowsThreshold rows stay: the cutoff moves up to the
		// creation time of the oldest of them.
		newest, err := a.db.WorkflowList(ctx, sysdb.WorkflowListParams{SortDesc: true, Limit: 1, Offset: max(*p.RowsThreshold-1, 0)})
		if err != nil {
			return 0, err
		}
		if len(newest) == 0 {
			return 0, nil // fewer rows than the threshold: all stay (unless the cutoff is set)
		}
		if cutoff == nil || newest[0].CreatedAt > *cutoff {
			at := newest[0].CreatedAt
			cutoff = &at
		}
	}
	if cutoff == nil {
		return 0, nil
	}
	// Strictly before the cutoff (the listing's bound is inclusive): the
	// oldest row the threshold keeps stays.
	before := *cutoff - 1
	deleted := 0
	for {
		wfs, err := a.db.WorkflowList(ctx, sysdb.WorkflowListParams{Statuses: terminalStatuses, CreatedBefore: &before, Limit: cleanupPage})
		if err != nil {
			return deleted, err
		}
		if len(wfs) == 0 {
			return deleted, nil
		}
		ids := make([]string, len(wfs))
		for i, wf := range wfs {
			ids[i] = wf.ID
		}
		if err := a.Delete(ctx, DeleteParams{WorkflowIDs: ids}); err != nil {
			return deleted, err
		}
		deleted += len(ids)
	}
}
