package agent

import (
	"context"
	"errors"

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
}

// Ready reports whether the engine is ready to serve.
func (r Readiness) Ready() bool {
	return r.DatabaseReachable && r.ListenerConnected && !r.Draining
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
	if len(ids) > 0 {
		a.wakeAllPollers()
	}
	return ids, nil
}
