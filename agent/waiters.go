package agent

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// waiters wakes requests waiting for workflows to end. Three sources wake
// them: outcomes written through this agent, the agent's notification
// channel (outcomes written by other agents), and one fallback poll for
// everything waited on (outcomes written by the DBOS SDKs, which do not
// notify). There is never one poll loop per waiter.
type waiters struct {
	db       sysdb.SystemDatabase
	interval time.Duration
	log      *zap.Logger

	mu   sync.Mutex
	byID map[string]map[chan struct{}]struct{}
}

func newWaiters(db sysdb.SystemDatabase, interval time.Duration, log *zap.Logger) *waiters {
	return &waiters{db: db, interval: interval, log: log, byID: map[string]map[chan struct{}]struct{}{}}
}

func (w *waiters) start(sup *supervisor) {
	sup.goCtx("result fallback poll", w.pollLoop)
}

// wake wakes the waiters of one workflow.
func (w *waiters) wake(workflowID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.byID[workflowID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (w *waiters) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, set := range w.byID {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (w *waiters) pollLoop(ctx context.Context) {
	everyTick(ctx, w.interval, w.pollOnce)
}

// pollOnce wakes the waiters of every awaited workflow that ended.
func (w *waiters) pollOnce(ctx context.Context) {
	w.mu.Lock()
	ids := make([]string, 0, len(w.byID))
	for id := range w.byID {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	ended, err := w.db.WorkflowList(ctx, sysdb.WorkflowListParams{
		WorkflowIDs: ids,
		Statuses:    []string{sysdb.StatusSuccess, sysdb.StatusError, sysdb.StatusCancelled, sysdb.StatusMaxRecoveryAttemptsExceeded},
	})
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("result fallback poll failed", zap.Error(err))
		}
		return
	}
	for _, wf := range ended {
		w.wake(wf.ID)
	}
}

// wait returns the workflow once it is no longer active, or ctx's error.
// A missing workflow is waited for too when waitForCreation is set (a
// result may be awaited before the enqueue commits), else NotFoundError.
func (w *waiters) wait(ctx context.Context, workflowID string, waitForCreation bool) (sysdb.Workflow, error) {
	ch, release := w.subscribe(workflowID)
	defer release()
	for {
		wf, err := w.db.WorkflowGet(ctx, workflowID)
		if err != nil {
			var nf *sysdb.NotFoundError
			if !(waitForCreation && asErr(err, &nf)) {
				return sysdb.Workflow{}, err
			}
		} else if !wf.Active() {
			return wf, nil
		}
		select {
		case <-ctx.Done():
			return sysdb.Workflow{}, ctx.Err()
		case <-ch:
		}
	}
}

// subscribe returns a channel that receives a signal whenever the workflow
// may have ended (at most one signal is buffered), and the function that
// unsubscribes it.
func (w *waiters) subscribe(workflowID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	set := w.byID[workflowID]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		w.byID[workflowID] = set
	}
	set[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(set, ch)
		if len(set) == 0 && w.byID[workflowID] != nil && len(w.byID[workflowID]) == 0 {
			delete(w.byID, workflowID)
		}
		w.mu.Unlock()
	}
}
