package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// WorkflowFunc is a workflow's code. Inputs and the returned output are
// opaque payload strings in the workflow's serialization.
type WorkflowFunc func(wf *Workflow, inputs *string) (output *string, err error)

// Worker runs the workflows the agent pushes to it, replaying recorded steps
// from the history that comes with each run.
type Worker struct {
	Client    *Client
	functions map[string]WorkflowFunc

	mu      sync.Mutex
	running map[string]*Workflow
	wg      sync.WaitGroup
}

// WorkerConfig is what a worker announces.
type WorkerConfig struct {
	AppName        string
	AppVersion     string
	Workflows      map[string]WorkflowFunc
	Queues         []protocol.QueueRegistration
	MaxConcurrency int
	// MaxRecoveryAttempts applies to every workflow (0 = DBOS default).
	MaxRecoveryAttempts int
}

// NewWorker connects a worker and starts serving pushes.
func NewWorker(ctx context.Context, socketPath string, cfg WorkerConfig) (*Worker, error) {
	hello := protocol.Hello{
		Role:           protocol.RoleWorker,
		AppName:        cfg.AppName,
		AppVersion:     cfg.AppVersion,
		Queues:         cfg.Queues,
		MaxConcurrency: cfg.MaxConcurrency,
	}
	for name := range cfg.Workflows {
		hello.Workflows = append(hello.Workflows, protocol.WorkflowRegistration{Name: name, MaxRecoveryAttempts: cfg.MaxRecoveryAttempts})
	}
	c, err := Dial(ctx, socketPath, hello)
	if err != nil {
		return nil, err
	}
	w := &Worker{Client: c, functions: cfg.Workflows, running: map[string]*Workflow{}}
	go w.servePushes()
	return w, nil
}

// Close disconnects; running workflows are abandoned (the agent hands them
// to another worker).
func (w *Worker) Close() error { return w.Client.Close() }

// Wait waits for the workflows this worker runs to return.
func (w *Worker) Wait() { w.wg.Wait() }

func (w *Worker) servePushes() {
	for p := range w.Client.Pushes() {
		switch p.Op {
		case protocol.PushRun:
			var run protocol.Run
			if err := protocol.DecodeBody(p.Body, &run); err != nil {
				continue
			}
			w.start(&run)
		case protocol.PushCancel:
			var c protocol.CancelPush
			if err := protocol.DecodeBody(p.Body, &c); err != nil {
				continue
			}
			w.mu.Lock()
			if wf := w.running[c.WorkflowID]; wf != nil {
				wf.cancel()
			}
			w.mu.Unlock()
		}
	}
}

// Start starts a workflow; when this worker registered it and no queue is
// given, it runs here and now.
func (w *Worker) Start(ctx context.Context, req protocol.StartWorkflow) (protocol.StartWorkflowReply, error) {
	if req.QueueName == "" {
		_, req.RunHere = w.functions[req.Name]
	}
	var reply protocol.StartWorkflowReply
	if err := w.Client.Call(ctx, protocol.OpStartWorkflow, &req, &reply); err != nil {
		return reply, err
	}
	if reply.Run != nil {
		w.start(reply.Run)
	}
	return reply, nil
}

func (w *Worker) start(run *protocol.Run) {
	fn := w.functions[run.Name]
	ctx, cancel := context.WithCancel(context.Background())
	wf := &Workflow{run: run, worker: w, ctx: ctx, cancel: cancel, history: map[int]protocol.Step{}}
	for _, s := range run.History {
		wf.history[s.FunctionID] = s
	}
	w.mu.Lock()
	w.running[run.WorkflowID] = wf
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			w.mu.Lock()
			delete(w.running, run.WorkflowID)
			w.mu.Unlock()
		}()
		var out *string
		var err error
		if fn == nil {
			err = fmt.Errorf("workflow function %q is not registered", run.Name)
		} else {
			out, err = fn(wf, run.Inputs)
		}
		if wf.stopped() {
			return // cancelled or fenced: the outcome is not ours to write
		}
		fin := protocol.Finish{WorkflowID: run.WorkflowID, OwnerXID: run.OwnerXID, Status: "SUCCESS", Output: out, Serialization: run.Serialization}
		if err != nil {
			msg := err.Error()
			fin.Status, fin.Output, fin.Error = "ERROR", nil, &msg
		}
		_ = w.Client.Call(context.Background(), protocol.OpFinish, &fin, nil)
	}()
}

// Workflow is one run of a workflow in this worker.
type Workflow struct {
	run     *protocol.Run
	worker  *Worker
	ctx     context.Context
	cancel  context.CancelFunc
	history map[int]protocol.Step
	nextID  int
	mu      sync.Mutex
	stopErr error
}

// ErrStopped is returned by Step once the run was cancelled or fenced.
var ErrStopped = errors.New("workflow run stopped")

// ID is the workflow id.
func (wf *Workflow) ID() string { return wf.run.WorkflowID }

// Context ends when the run is cancelled.
func (wf *Workflow) Context() context.Context { return wf.ctx }

func (wf *Workflow) stopped() bool {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	return wf.stopErr != nil || wf.ctx.Err() != nil
}

// Step runs fn as the next step, or returns its recorded outcome when the
// history has it.
func (wf *Workflow) Step(name string, fn func(ctx context.Context) (*string, error)) (*string, error) {
	wf.mu.Lock()
	wf.nextID++
	id := wf.nextID
	stop := wf.stopErr
	wf.mu.Unlock()
	if stop != nil {
		return nil, stop
	}
	if rec, ok := wf.history[id]; ok {
		if rec.Name != name {
			return nil, fmt.Errorf("step %d: history has %q, code runs %q", id, rec.Name, name)
		}
		if rec.Error != nil {
			return nil, errors.New(*rec.Error)
		}
		return rec.Output, nil
	}
	if err := wf.ctx.Err(); err != nil {
		return nil, wf.stop(ErrStopped)
	}
	started := time.Now().UnixMilli()
	out, stepErr := fn(wf.ctx)
	rec := protocol.RecordStep{WorkflowID: wf.run.WorkflowID, OwnerXID: wf.run.OwnerXID, Step: protocol.Step{
		FunctionID: id, Name: name, Output: out, Serialization: wf.run.Serialization,
		StartedAtMS: started, CompletedAtMS: time.Now().UnixMilli(),
	}}
	if stepErr != nil {
		msg := stepErr.Error()
		rec.Output, rec.Error = nil, &msg
	}
	if err := wf.worker.Client.Call(context.Background(), protocol.OpRecordStep, &rec, nil); err != nil {
		var perr *protocol.Error
		if errors.As(err, &perr) && (perr.Code == protocol.CodeFenced || perr.Code == protocol.CodeWorkflowCancelled) {
			return nil, wf.stop(fmt.Errorf("%w: %v", ErrStopped, perr))
		}
		return nil, err
	}
	return out, stepErr
}

func (wf *Workflow) stop(err error) error {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	if wf.stopErr == nil {
		wf.stopErr = err
	}
	return wf.stopErr
}
