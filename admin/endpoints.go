package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

type handler struct {
	agent *agent.Agent
	log   *zap.Logger
}

type errorBody struct {
	Error string `json:"error"`
}

// maxBodyBytes bounds a request body: filters and id lists are small.
const maxBodyBytes = 1 << 20

// maxListed bounds one workflow listing, the limit when none is given.
const maxListed = 10000

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeText answers as DBOS's admin server does for health and deactivate:
// a bare word, labelled JSON.
func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// writeError maps engine errors to statuses: unknown workflows are 404,
// bad arguments 400, the rest 500 (DBOS answers its own failures with 500
// and {"error": ...}).
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var notFound *sysdb.NotFoundError
	var notFoundMany *agent.WorkflowsNotFoundError
	var invalid *agent.InvalidArgumentError
	status := http.StatusInternalServerError
	switch {
	case errors.As(err, &notFound), errors.As(err, &notFoundMany):
		status = http.StatusNotFound
	case errors.As(err, &invalid):
		status = http.StatusBadRequest
	}
	if status == http.StatusInternalServerError {
		h.log.Warn("admin request failed", zap.String("path", r.URL.Path), zap.Error(err))
	}
	writeJSON(w, status, errorBody{Error: err.Error()})
}

// decodeBody reads a JSON body into v; an empty body leaves v as it is.
func decodeBody(r *http.Request, v any) error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return err
	}
	if len(raw) > maxBodyBytes {
		return fmt.Errorf("body larger than %d bytes", maxBodyBytes)
	}
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, v)
}

func badJSON(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusBadRequest, errorBody{Error: "Invalid JSON input: " + err.Error()})
}

// livez answers while the process serves HTTP at all.
func (h *handler) livez(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
}

type readinessBody struct {
	Status            string `json:"status"`
	DatabaseReachable bool   `json:"database_reachable"`
	DatabaseError     string `json:"database_error,omitempty"`
	ListenerConnected bool   `json:"listener_connected"`
	// MigrationsDone is always true here: the admin server starts only
	// after the engine, which migrates before it starts.
	MigrationsDone bool `json:"migrations_done"`
	Draining       bool `json:"draining"`
	Deactivated    bool `json:"deactivated"`
}

// readyz is 200 when the engine can serve, 503 (with what is wrong) when
// not.
func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readinessTimeout)
	defer cancel()
	rd := h.agent.Readiness(ctx)
	body := readinessBody{
		Status: "ready", DatabaseReachable: rd.DatabaseReachable, DatabaseError: rd.DatabaseError,
		ListenerConnected: rd.ListenerConnected, MigrationsDone: true, Draining: rd.Draining,
		Deactivated: rd.Deactivated,
	}
	status := http.StatusOK
	if !rd.Ready() {
		body.Status = "not ready"
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, body)
}

// healthz is DBOS's health check: 200 "healthy" while the process serves.
func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "healthy")
}

// recover takes a JSON list of executor ids and answers the ids of the
// workflows put back on their queues.
func (h *handler) recover(w http.ResponseWriter, r *http.Request) {
	var executors []string
	if err := decodeBody(r, &executors); err != nil {
		badJSON(w, err)
		return
	}
	ids, err := h.agent.RecoverExecutors(r.Context(), executors)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if ids == nil {
		ids = []string{}
	}
	writeJSON(w, http.StatusOK, ids)
}

type rateLimit struct {
	Limit  int     `json:"limit"`
	Period float64 `json:"period"`
}

// queueMetadata is one queue as DBOS lists it: absent limits are left out.
type queueMetadata struct {
	Name              string     `json:"name"`
	Concurrency       *int       `json:"concurrency,omitempty"`
	WorkerConcurrency *int       `json:"workerConcurrency,omitempty"`
	RateLimit         *rateLimit `json:"rateLimit,omitempty"`
}

// queuesMetadata lists the registered queues with their limits.
func (h *handler) queuesMetadata(w http.ResponseWriter, r *http.Request) {
	queues, err := h.agent.ListQueues(r.Context(), agent.ListQueuesParams{})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := []queueMetadata{}
	for _, q := range queues {
		if !q.Registered {
			continue
		}
		m := queueMetadata{Name: q.Name, Concurrency: q.Concurrency, WorkerConcurrency: q.WorkerConcurrency}
		if q.RateLimitMax != nil && q.RateLimitPeriodSec != nil {
			m.RateLimit = &rateLimit{Limit: *q.RateLimitMax, Period: *q.RateLimitPeriodSec}
		}
		out = append(out, m)
	}
	// DBOS lists its internal queue, where forks and restarts wait, with
	// the rest; the agent serves it whether or not a row names it.
	if !slices.ContainsFunc(out, func(m queueMetadata) bool { return m.Name == sysdb.InternalQueueName }) {
		out = append(out, queueMetadata{Name: sysdb.InternalQueueName})
	}
	writeJSON(w, http.StatusOK, out)
}

// stringOrList is a filter DBOS takes as one string or a list of them.
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(raw []byte) error {
	var one *string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one != nil {
			*s = []string{*one}
		}
		return nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return fmt.Errorf("want a string or a list of strings")
	}
	*s = many
	return nil
}

// workflowFilters is the body of POST /workflows and POST /queues, with the
// keys DBOS's admin server reads (unknown keys are ignored, as there). Both
// listings take every filter.
type workflowFilters struct {
	WorkflowUUIDs     []string     `json:"workflow_uuids"`
	AuthenticatedUser stringOrList `json:"authenticated_user"`
	StartTime         *string      `json:"start_time"`
	EndTime           *string      `json:"end_time"`
	Status            stringOrList `json:"status"`
	AppVersion        stringOrList `json:"application_version"`
	ForkedFrom        stringOrList `json:"forked_from"`
	ParentWorkflowID  stringOrList `json:"parent_workflow_id"`
	WorkflowName      stringOrList `json:"workflow_name"`
	QueueName         stringOrList `json:"queue_name"`
	Limit             *int         `json:"limit"`
	Offset            *int         `json:"offset"`
	SortDesc          bool         `json:"sort_desc"`
	WorkflowIDPrefix  stringOrList `json:"workflow_id_prefix"`
	// LoadInput and LoadOutput default to false, as in DBOS's admin
	// server: a listing carries no payloads unless asked.
	LoadInput  bool `json:"load_input"`
	LoadOutput bool `json:"load_output"`
}

// parseInstant reads DBOS's ISO 8601 times (with or without a zone; UTC
// when none).
func parseInstant(field string, s *string) (time.Time, error) {
	if s == nil || *s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, *s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, &agent.InvalidArgumentError{Message: fmt.Sprintf("%s %q is not an ISO 8601 time", field, *s)}
}

func (f workflowFilters) params(queuesOnly bool) (agent.ListWorkflowsParams, error) {
	p := agent.ListWorkflowsParams{
		WorkflowIDs: f.WorkflowUUIDs, AuthenticatedUsers: f.AuthenticatedUser, Names: f.WorkflowName,
		Statuses: f.Status, AppVersions: f.AppVersion, ForkedFrom: f.ForkedFrom, ParentWorkflowIDs: f.ParentWorkflowID,
		QueueNames: f.QueueName, IDPrefixes: f.WorkflowIDPrefix, SortDesc: f.SortDesc, QueuesOnly: queuesOnly,
		LoadInputs: f.LoadInput, LoadOutputs: f.LoadOutput,
	}
	// A listing is read whole into memory (payloads included): it is
	// bounded, and a caller pages past maxListed with offset.
	p.Limit = maxListed
	if f.Limit != nil {
		if *f.Limit > maxListed {
			return p, &agent.InvalidArgumentError{Message: fmt.Sprintf("limit %d: at most %d workflows per request (page with offset)", *f.Limit, maxListed)}
		}
		if *f.Limit != 0 { // 0 would be no bound
			p.Limit = *f.Limit
		}
	}
	if f.Offset != nil {
		p.Offset = *f.Offset
	}
	var err error
	if p.CreatedAfter, err = parseInstant("start_time", f.StartTime); err != nil {
		return p, err
	}
	if p.CreatedBefore, err = parseInstant("end_time", f.EndTime); err != nil {
		return p, err
	}
	if queuesOnly && len(p.Statuses) == 0 {
		// DBOS's queued listing is of the workflows still on a queue.
		p.Statuses = []string{sysdb.StatusEnqueued, sysdb.StatusPending}
	}
	return p, nil
}

func (h *handler) list(w http.ResponseWriter, r *http.Request, queuesOnly bool) {
	var f workflowFilters
	if err := decodeBody(r, &f); err != nil {
		badJSON(w, err)
		return
	}
	p, err := f.params(queuesOnly)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	wfs, err := h.agent.ListWorkflows(r.Context(), p)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := make([]workflowOutput, len(wfs))
	for i, wf := range wfs {
		out[i] = outputOf(wf)
	}
	writeJSON(w, http.StatusOK, out)
}

// listWorkflows is DBOS's POST /workflows: the workflows the filter body
// keeps.
func (h *handler) listWorkflows(w http.ResponseWriter, r *http.Request) { h.list(w, r, false) }

// listQueued is DBOS's POST /queues: the workflows on queues.
func (h *handler) listQueued(w http.ResponseWriter, r *http.Request) { h.list(w, r, true) }

// getWorkflow answers one workflow, or 404.
func (h *handler) getWorkflow(w http.ResponseWriter, r *http.Request) {
	wf, err := h.agent.GetWorkflow(r.Context(), agent.GetWorkflowParams{WorkflowID: r.PathValue("id"), LoadPayloads: true})
	if err != nil {
		var notFound *sysdb.NotFoundError
		if errors.As(err, &notFound) {
			// DBOS answers an unknown workflow with an empty 404.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			return
		}
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, outputOf(wf))
}

// steps answers a workflow's recorded steps.
func (h *handler) steps(w http.ResponseWriter, r *http.Request) {
	steps, err := h.agent.ListSteps(r.Context(), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := make([]workflowStep, len(steps))
	for i, s := range steps {
		out[i] = stepOf(s)
	}
	writeJSON(w, http.StatusOK, out)
}

// cancel cancels a workflow: 204, as DBOS answers.
func (h *handler) cancel(w http.ResponseWriter, r *http.Request) {
	if _, err := h.agent.Cancel(r.Context(), agent.CancelParams{WorkflowID: r.PathValue("id")}); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// resume puts a cancelled or failed-over workflow back on its queue: 204.
func (h *handler) resume(w http.ResponseWriter, r *http.Request) {
	if err := h.agent.Resume(r.Context(), agent.ResumeParams{WorkflowIDs: []string{r.PathValue("id")}}); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type workflowIDBody struct {
	WorkflowID string `json:"workflow_id"`
}

// restart runs a workflow again from its start under a new id, as DBOS's
// restart_workflow does: a fork from step 0, which copies no step whether
// the SDK numbers steps from 0 (TypeScript) or 1 (Python).
func (h *handler) restart(w http.ResponseWriter, r *http.Request) {
	id, err := h.agent.Fork(r.Context(), agent.Caller{}, agent.ForkParams{WorkflowID: r.PathValue("id"), StartStep: 0})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, workflowIDBody{WorkflowID: id})
}

type forkBody struct {
	StartStep     *int   `json:"start_step"`
	NewWorkflowID string `json:"new_workflow_id"`
	AppVersion    string `json:"application_version"`
}

// fork starts a new workflow from a workflow's steps below start_step
// (default 1, the first).
func (h *handler) fork(w http.ResponseWriter, r *http.Request) {
	var b forkBody
	if err := decodeBody(r, &b); err != nil {
		badJSON(w, err)
		return
	}
	start := 1
	if b.StartStep != nil {
		start = *b.StartStep
	}
	id, err := h.agent.Fork(r.Context(), agent.Caller{}, agent.ForkParams{
		WorkflowID: r.PathValue("id"), StartStep: start, NewWorkflowID: b.NewWorkflowID, AppVersion: b.AppVersion,
	})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, workflowIDBody{WorkflowID: id})
}

// deactivate is DBOS's GET /deactivate: this agent fires no more schedules
// and reports not ready; 200 "deactivated", however often asked.
func (h *handler) deactivate(w http.ResponseWriter, _ *http.Request) {
	h.agent.Deactivate()
	writeText(w, http.StatusOK, "deactivated")
}

type garbageCollectBody struct {
	CutoffEpochTimestampMS *int64 `json:"cutoff_epoch_timestamp_ms"`
	RowsThreshold          *int   `json:"rows_threshold"`
}

// garbageCollect is DBOS's POST /dbos-garbage-collect: finished workflows
// older than the bounds are deleted; 204.
func (h *handler) garbageCollect(w http.ResponseWriter, r *http.Request) {
	var b garbageCollectBody
	if err := decodeBody(r, &b); err != nil {
		badJSON(w, err)
		return
	}
	p := agent.GarbageCollectParams{RowsThreshold: b.RowsThreshold}
	if b.CutoffEpochTimestampMS != nil {
		cutoff := time.UnixMilli(*b.CutoffEpochTimestampMS)
		p.Cutoff = &cutoff
	}
	n, err := h.agent.GarbageCollect(r.Context(), p)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.log.Info("admin garbage collection", zap.Int("workflows_deleted", n))
	w.WriteHeader(http.StatusNoContent)
}

type globalTimeoutBody struct {
	CutoffEpochTimestampMS *int64 `json:"cutoff_epoch_timestamp_ms"`
	// TimeoutMS is the cutoff as an age (now minus timeout_ms), for a
	// caller without a clock it trusts.
	TimeoutMS *int64 `json:"timeout_ms"`
}

// globalTimeout is DBOS's POST /dbos-global-timeout: every active workflow
// created before cutoff_epoch_timestamp_ms is cancelled; 204.
func (h *handler) globalTimeout(w http.ResponseWriter, r *http.Request) {
	var b globalTimeoutBody
	if err := decodeBody(r, &b); err != nil {
		badJSON(w, err)
		return
	}
	var cutoff time.Time
	switch {
	case b.CutoffEpochTimestampMS != nil && b.TimeoutMS != nil:
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "give cutoff_epoch_timestamp_ms or timeout_ms, not both"})
		return
	case b.CutoffEpochTimestampMS != nil:
		cutoff = time.UnixMilli(*b.CutoffEpochTimestampMS)
	case b.TimeoutMS != nil && *b.TimeoutMS >= 0:
		cutoff = time.Now().Add(-time.Duration(*b.TimeoutMS) * time.Millisecond)
	default:
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "cutoff_epoch_timestamp_ms (or a non-negative timeout_ms) is required"})
		return
	}
	n, err := h.agent.CancelOlderThan(r.Context(), cutoff)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.log.Info("admin global timeout", zap.Int("workflows_cancelled", n))
	w.WriteHeader(http.StatusNoContent)
}
