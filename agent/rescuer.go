package agent

import (
	"context"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// rescueBatch bounds one rescue statement, so that a large backlog is taken
// back in short transactions.
const rescueBatch = 100

// rescuer periodically returns to their queue the rows this agent claimed
// that no live run holds: a dequeue whose commit acknowledgement was lost
// (the rows landed, the poller never learned their tokens), a hand-back or
// an unclaim that failed, a run forgotten by a bug. Without it such rows
// would stay PENDING until the agent restarts. River's JobRescuer is the
// model: a horizon (a row must have been unchanged that long, so a claim
// still being dispatched is never taken back), bounded batches, and test
// signals instead of sleeps.
//
// Only rows whose owner token carries this agent process's prefix are
// considered: an SDK process sharing the executor id owns its own rows.
type rescuer struct {
	a *Agent
}

func newRescuer(a *Agent) *rescuer { return &rescuer{a: a} }

func (r *rescuer) loop(ctx context.Context) {
	everyTick(ctx, r.a.cfg.RescueInterval, r.round)
}

func (r *rescuer) round(ctx context.Context) {
	if r.a.draining.Load() {
		return
	}
	n, err := r.rescueOnce(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		r.a.log.Warn("rescuing orphaned workflows failed; next round retries", zap.Error(err))
	case n > 0:
		r.a.log.Info("rescued workflows no run held", zap.Int("count", n))
	}
	r.a.cfg.testSignals.rescued(n, err)
}

// rescueOnce takes back every orphaned claim, a batch at a time, and
// reports how many rows went back to a queue.
func (r *rescuer) rescueOnce(ctx context.Context) (int, error) {
	a := r.a
	total := 0
	for {
		a.mu.Lock()
		held := make([]string, 0, len(a.runs))
		for _, run := range a.runs {
			held = append(held, run.ownerXID)
		}
		a.mu.Unlock()
		candidates, err := a.db.WorkflowOrphaned(ctx, sysdb.WorkflowOrphanedParams{
			ExecutorID:  a.cfg.ExecutorID,
			OwnerPrefix: a.ownerPrefix,
			OlderThan:   a.cfg.RescueHorizon,
			HeldTokens:  held,
			Limit:       rescueBatch,
		})
		if err != nil {
			return total, err
		}
		// A run may have started since the list of held tokens was taken,
		// and a claim may be on its way to a worker: both stay.
		orphans := candidates[:0:0]
		a.mu.Lock()
		for _, c := range candidates {
			if run := a.runs[c.WorkflowID]; run != nil && run.ownerXID == c.OwnerXID {
				continue
			}
			if a.claiming[c.WorkflowID] > 0 {
				continue
			}
			orphans = append(orphans, c)
		}
		a.mu.Unlock()
		if len(orphans) > 0 {
			// Only rows still PENDING under the listed token move: a row
			// that finished or was claimed again meanwhile stays.
			ids, err := a.db.WorkflowRequeue(ctx, orphans)
			if err != nil {
				return total, err
			}
			total += len(ids)
			a.wakeAllPollers()
		}
		if len(candidates) < rescueBatch || len(orphans) == 0 {
			return total, nil
		}
	}
}
