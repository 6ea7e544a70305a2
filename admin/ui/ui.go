// Package ui is the workflow dashboard the admin server serves at /ui: one
// page of plain HTML, JavaScript and CSS embedded in the binary (no build
// step, nothing fetched from elsewhere, so it works offline), and the few
// JSON reads it needs beyond DBOS's admin endpoints: the workflow list, a
// workflow with its payloads decoded for people, and the queues, schedules
// and versions. The reads are the page's own shapes, so that the page does
// not follow the admin endpoints' DBOS shapes as they change; cancel,
// resume and fork go through the admin server's DBOS endpoints (POST
// /workflows/{id}/cancel, ...).
package ui

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/dbos-agent/dbos-agent/admin"
	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/internal/values"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

//go:embed static
var static embed.FS

// Routes are the dashboard's routes for admin.Config.Routes. The page
// itself is open (it holds no data; with a token set it asks for it and
// sends it on each read), the JSON reads are behind the token.
func Routes(a *agent.Agent) []admin.Route {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	h := &api{agent: a}
	return []admin.Route{
		{Pattern: "GET /ui", Handler: http.RedirectHandler("/ui/", http.StatusFound), Open: true},
		{Pattern: "GET /ui/", Handler: http.StripPrefix("/ui/", http.FileServerFS(files)), Open: true},
		{Pattern: "GET /ui/api/workflows", Handler: http.HandlerFunc(h.list)},
		{Pattern: "GET /ui/api/workflows/{id}", Handler: http.HandlerFunc(h.workflow)},
		{Pattern: "GET /ui/api/queues", Handler: http.HandlerFunc(h.queues)},
		{Pattern: "GET /ui/api/schedules", Handler: http.HandlerFunc(h.schedules)},
		{Pattern: "GET /ui/api/versions", Handler: http.HandlerFunc(h.versions)},
	}
}

type api struct{ agent *agent.Agent }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var notFound *sysdb.NotFoundError
	if errors.As(err, &notFound) {
		status = http.StatusNotFound
	}
	var invalid *agent.InvalidArgumentError
	if errors.As(err, &invalid) {
		status = http.StatusBadRequest
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// display is a stored value decoded for people; nil stays nil (no value
// differs from an empty one).
func display(serialization *string, stored *string) *string {
	if stored == nil {
		return nil
	}
	s := values.Display(serialization, *stored)
	return &s
}

type workflowView struct {
	ID            string  `json:"id"`
	Status        string  `json:"status"`
	Name          string  `json:"name"`
	ClassName     *string `json:"class_name"`
	QueueName     *string `json:"queue_name"`
	ExecutorID    *string `json:"executor_id"`
	AppVersion    *string `json:"app_version"`
	Parent        *string `json:"parent_workflow_id"`
	ForkedFrom    *string `json:"forked_from"`
	CreatedAt     int64   `json:"created_at"`
	UpdatedAt     int64   `json:"updated_at"`
	StartedAt     *int64  `json:"started_at"`
	CompletedAt   *int64  `json:"completed_at"`
	Attempts      int64   `json:"recovery_attempts"`
	Serialization *string `json:"serialization"`
	Input         *string `json:"input"`
	Output        *string `json:"output"`
	Error         *string `json:"error"`
}

type listedView struct {
	ID         string  `json:"id"`
	Status     string  `json:"status"`
	Name       string  `json:"name"`
	QueueName  *string `json:"queue_name"`
	AppVersion *string `json:"app_version"`
	CreatedAt  int64   `json:"created_at"`
	UpdatedAt  int64   `json:"updated_at"`
}

// maxPage bounds one page of the list (the page offers 20, 50 and 100).
const maxPage = 1000

// intParam is the query parameter name as a non-negative integer, def
// when absent.
func intParam(r *http.Request, name string, def int) (int, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 {
		return 0, &agent.InvalidArgumentError{Message: fmt.Sprintf("%s %q is not a non-negative integer", name, raw)}
	}
	return n, nil
}

// list is a page of the workflows, newest first (order=asc: oldest), filtered
// by the query's status, name, queue, id prefix, user, application version
// and creation times after and before (RFC 3339; each optional), limit
// (default 50, at most maxPage) and offset.
func (h *api) list(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", 50)
	if err == nil && (limit == 0 || limit > maxPage) {
		err = &agent.InvalidArgumentError{Message: fmt.Sprintf("limit %d: from 1 to %d", limit, maxPage)}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	offset, err := intParam(r, "offset", 0)
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	p := agent.ListWorkflowsParams{Limit: limit, Offset: offset, SortDesc: q.Get("order") != "asc"}
	if o := q.Get("order"); o != "" && o != "asc" && o != "desc" {
		writeError(w, &agent.InvalidArgumentError{Message: fmt.Sprintf("order %q: asc or desc", o)})
		return
	}
	for _, bound := range []struct {
		param string
		into  *time.Time
	}{{"created_after", &p.CreatedAfter}, {"created_before", &p.CreatedBefore}} {
		if v := q.Get(bound.param); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeError(w, &agent.InvalidArgumentError{Message: fmt.Sprintf("%s %q is not an RFC 3339 time", bound.param, v)})
				return
			}
			*bound.into = t
		}
	}
	if v := q.Get("user"); v != "" {
		p.AuthenticatedUsers = []string{v}
	}
	if v := q.Get("version"); v != "" {
		p.AppVersions = []string{v}
	}
	if v := q.Get("status"); v != "" {
		p.Statuses = []string{v}
	}
	if v := q.Get("name"); v != "" {
		p.Names = []string{v}
	}
	if v := q.Get("queue"); v != "" {
		p.QueueNames = []string{v}
	}
	if v := q.Get("prefix"); v != "" {
		p.IDPrefixes = []string{v}
	}
	wfs, err := h.agent.ListWorkflows(r.Context(), p)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]listedView, len(wfs))
	for i, wf := range wfs {
		out[i] = listedView{ID: wf.ID, Status: wf.Status, Name: wf.Name, QueueName: wf.QueueName, AppVersion: wf.ApplicationVersion,
			CreatedAt: wf.CreatedAt, UpdatedAt: wf.UpdatedAt}
	}
	writeJSON(w, http.StatusOK, out)
}

type stepView struct {
	FunctionID  int     `json:"function_id"`
	Name        string  `json:"name"`
	StartedAt   *int64  `json:"started_at"`
	CompletedAt *int64  `json:"completed_at"`
	Child       *string `json:"child_workflow_id"`
	Output      *string `json:"output"`
	Error       *string `json:"error"`
}

type keyValue struct {
	Key        string `json:"key"`
	Value      string `json:"value"`
	FunctionID *int   `json:"function_id,omitempty"`
	Offset     *int   `json:"offset,omitempty"`
	// Closed marks a stream's closing marker (its value is DBOS's marker
	// text, not something the workflow wrote).
	Closed bool `json:"closed,omitempty"`
}

type messageView struct {
	Topic     *string `json:"topic"`
	Value     string  `json:"value"`
	CreatedAt int64   `json:"created_at"`
	Consumed  bool    `json:"consumed"`
}

type detailView struct {
	Workflow workflowView  `json:"workflow"`
	Steps    []stepView    `json:"steps"`
	Children []string      `json:"children"`
	Events   []keyValue    `json:"events"`
	Messages []messageView `json:"messages"`
	Streams  []keyValue    `json:"streams"`
}

// workflow is one workflow with everything the engine reads of it, every
// payload decoded with values.Display.
func (h *api) workflow(w http.ResponseWriter, r *http.Request) {
	ctx, id := r.Context(), r.PathValue("id")
	wf, err := h.agent.GetWorkflow(ctx, agent.GetWorkflowParams{WorkflowID: id, LoadPayloads: true})
	if err != nil {
		writeError(w, err)
		return
	}
	out := detailView{Workflow: workflowView{
		ID: wf.ID, Status: wf.Status, Name: wf.Name, ClassName: wf.ClassName, QueueName: wf.QueueName,
		ExecutorID: wf.ExecutorID, AppVersion: wf.ApplicationVersion, Parent: wf.ParentWorkflowID,
		ForkedFrom: wf.ForkedFrom, CreatedAt: wf.CreatedAt, UpdatedAt: wf.UpdatedAt, StartedAt: wf.StartedAt,
		CompletedAt: wf.CompletedAt, Attempts: wf.RecoveryAttempts, Serialization: wf.Serialization,
		Input: display(wf.Serialization, wf.Inputs), Output: display(wf.Serialization, wf.Output),
		Error: display(wf.Serialization, wf.Error),
	}, Steps: []stepView{}, Children: []string{}, Events: []keyValue{}, Messages: []messageView{}, Streams: []keyValue{}}

	steps, err := h.agent.ListSteps(ctx, id)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, s := range steps {
		out.Steps = append(out.Steps, stepView{
			FunctionID: s.FunctionID, Name: s.Name, StartedAt: s.StartedAt, CompletedAt: s.CompletedAt,
			Child: s.ChildWorkflowID, Output: display(s.Serialization, s.Output), Error: display(s.Serialization, s.Error),
		})
	}
	if children, err := h.agent.WorkflowChildren(ctx, id); err != nil {
		writeError(w, err)
		return
	} else if children != nil {
		out.Children = children
	}
	events, err := h.agent.EventHistory(ctx, id)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, e := range events {
		fid := e.FunctionID
		out.Events = append(out.Events, keyValue{Key: e.Key, Value: values.Display(e.Serialization, e.Value), FunctionID: &fid})
	}
	messages, err := h.agent.ListMessages(ctx, id)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, m := range messages {
		out.Messages = append(out.Messages, messageView{Topic: m.Topic, Value: values.Display(m.Serialization, m.Message), CreatedAt: m.CreatedAt, Consumed: m.Consumed})
	}
	streams, err := h.agent.ListStreams(ctx, id)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, s := range streams {
		fid, off := s.FunctionID, s.Offset
		out.Streams = append(out.Streams, keyValue{Key: s.Key, Value: values.Display(s.Serialization, s.Value), FunctionID: &fid, Offset: &off,
			Closed: s.Closed()})
	}
	writeJSON(w, http.StatusOK, out)
}

type queueView struct {
	Name               string   `json:"name"`
	Registered         bool     `json:"registered"`
	Application        *string  `json:"application"`
	Concurrency        *int     `json:"concurrency"`
	WorkerConcurrency  *int     `json:"worker_concurrency"`
	RateLimitMax       *int     `json:"rate_limit_max"`
	RateLimitPeriodSec *float64 `json:"rate_limit_period_sec"`
	PriorityEnabled    bool     `json:"priority_enabled"`
	Partitioned        bool     `json:"partitioned"`
	Enqueued           int64    `json:"enqueued"`
	Pending            int64    `json:"pending"`
	Delayed            int64    `json:"delayed"`
}

// queues are every queue with its limits and load (enqueued, running,
// delayed).
func (h *api) queues(w http.ResponseWriter, r *http.Request) {
	qs, err := h.agent.ListQueues(r.Context(), agent.ListQueuesParams{})
	writeViews(w, qs, err, func(q agent.QueueState) queueView {
		return queueView{
			Name: q.Name, Registered: q.Registered, Application: q.ApplicationName, Concurrency: q.Concurrency,
			WorkerConcurrency: q.WorkerConcurrency, RateLimitMax: q.RateLimitMax, RateLimitPeriodSec: q.RateLimitPeriodSec,
			PriorityEnabled: q.PriorityEnabled, Partitioned: q.PartitionQueue,
			Enqueued: q.Enqueued, Pending: q.Pending, Delayed: q.Delayed,
		}
	})
}

// writeViews answers a listing: each item as the page shows it, or the
// listing's error.
func writeViews[T, V any](w http.ResponseWriter, items []T, err error, view func(T) V) {
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]V, len(items))
	for i, item := range items {
		out[i] = view(item)
	}
	writeJSON(w, http.StatusOK, out)
}

type scheduleView struct {
	Name         string  `json:"name"`
	WorkflowName string  `json:"workflow_name"`
	Cron         string  `json:"cron"`
	Timezone     *string `json:"timezone"`
	Status       string  `json:"status"`
	LastFiredAt  *string `json:"last_fired_at"`
}

// schedules are every application's schedules.
func (h *api) schedules(w http.ResponseWriter, r *http.Request) {
	ss, err := h.agent.ListSchedules(r.Context(), agent.Caller{}, agent.ListSchedulesParams{AllApplications: true})
	writeViews(w, ss, err, func(s sysdb.Schedule) scheduleView {
		return scheduleView{Name: s.Name, WorkflowName: s.WorkflowName, Cron: s.Cron, Timezone: s.CronTimezone, Status: s.Status, LastFiredAt: s.LastFiredAtRaw}
	})
}

type versionView struct {
	Name        string  `json:"name"`
	Application *string `json:"application"`
	Timestamp   int64   `json:"timestamp"`
	CreatedAt   int64   `json:"created_at"`
}

// versions are every application's versions, the latest first.
func (h *api) versions(w http.ResponseWriter, r *http.Request) {
	vs, err := h.agent.ListVersions(r.Context(), agent.Caller{})
	writeViews(w, vs, err, func(v sysdb.AppVersion) versionView {
		return versionView{Name: v.Name, Application: v.ApplicationName, Timestamp: v.Timestamp, CreatedAt: v.CreatedAt}
	})
}
