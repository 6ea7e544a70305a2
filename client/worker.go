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
	Client *Client

	mu sync.Mutex
	// functions grows with Register; guarded by mu.
	functions map[string]WorkflowFunc
	running   map[string]*Workflow
	wg        sync.WaitGroup
	// maxRecoveryAttempts is WorkerConfig's, for Register's functions too.
	maxRecoveryAttempts int
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
	// TrustedUIDs may serve the agent's socket besides this process's own
	// user and root (see TrustUIDs).
	TrustedUIDs []uint32
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
	c, err := Dial(ctx, socketPath, hello, TrustUIDs(cfg.TrustedUIDs...))
	if err != nil {
		return nil, err
	}
	functions := make(map[string]WorkflowFunc, len(cfg.Workflows))
	for name, fn := range cfg.Workflows {
		functions[name] = fn
	}
	w := &Worker{Client: c, functions: functions, running: map[string]*Workflow{}, maxRecoveryAttempts: cfg.MaxRecoveryAttempts}
	go w.servePushes()
	return w, nil
}

// Register adds workflow functions and queues after the hello (the
// register op): the agent dispatches their runs here from its reply on.
// The functions are known here before the request is sent, since a run of
// one may be pushed before the reply arrives.
func (w *Worker) Register(ctx context.Context, functions map[string]WorkflowFunc, queues []protocol.QueueRegistration) error {
	req := protocol.Register{Queues: queues}
	w.mu.Lock()
	for name, fn := range functions {
		w.functions[name] = fn
		req.Workflows = append(req.Workflows, protocol.WorkflowRegistration{Name: name, MaxRecoveryAttempts: w.maxRecoveryAttempts})
	}
	w.mu.Unlock()
	return w.Client.Call(ctx, protocol.OpRegister, &req, nil)
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
		w.mu.Lock()
		_, req.RunHere = w.functions[req.Name]
		w.mu.Unlock()
	}
	reply, err := w.Client.StartWorkflow(ctx, req)
	if err != nil {
		return reply, err
	}
	if reply.Run != nil {
		w.start(reply.Run)
	}
	return reply, nil
}

func (w *Worker) start(run *protocol.Run) {
	ctx, cancel := context.WithCancel(context.Background())
	wf := &Workflow{run: run, worker: w, ctx: ctx, cancel: cancel, history: map[int]protocol.Step{}}
	for _, s := range run.History {
		wf.history[s.FunctionID] = s
	}
	w.mu.Lock()
	fn := w.functions[run.Name]
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

// Client is the worker's connection, for calls the Workflow methods do not
// wrap (with a caller from NextCaller).
func (wf *Workflow) Client() *Client { return wf.worker.Client }

// NextCaller takes the next function id for a durable call made from
// workflow code: the call records its step there, owned by this run.
func (wf *Workflow) NextCaller() protocol.Caller {
	return protocol.Caller{WorkflowID: wf.run.WorkflowID, OwnerXID: wf.run.OwnerXID, FunctionID: wf.nextFunctionID()}
}

func (wf *Workflow) nextFunctionID() int {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	wf.nextID++
	return wf.nextID
}

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
	if rec, err := wf.recorded(id, name); err != nil || rec != nil {
		if err != nil {
			return nil, err
		}
		if rec.Error != nil {
			return nil, errors.New(*rec.Error)
		}
		return rec.Output, nil
	}
	if wf.ctx.Err() != nil {
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
	// Not the run's context: a step that ran is recorded even when a cancel
	// arrives meanwhile (the agent then answers workflow_cancelled).
	if err := wf.call(context.Background(), protocol.OpRecordStep, &rec, nil); err != nil {
		return nil, err
	}
	return out, stepErr
}

// recorded returns what the history holds at function id, or nil; another
// step recorded there means the code is not the code that ran.
func (wf *Workflow) recorded(id int, name string) (*protocol.Step, error) {
	rec, ok := wf.history[id]
	if !ok {
		return nil, nil
	}
	if rec.Name != name {
		return nil, fmt.Errorf("step %d: history has %q, code runs %q", id, rec.Name, name)
	}
	return &rec, nil
}

// call makes a request on behalf of the run. An answer that the run lost
// the workflow (fenced, cancelled) or a cancel push stops the run: every
// later call returns ErrStopped.
func (wf *Workflow) call(ctx context.Context, op string, req, reply any) error {
	return wf.stopOn(wf.worker.Client.Call(ctx, op, req, reply))
}

// stopOn passes err on, first stopping the run when err says it lost the
// workflow.
func (wf *Workflow) stopOn(err error) error {
	var perr *protocol.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &perr) && (perr.Code == protocol.CodeFenced || perr.Code == protocol.CodeWorkflowCancelled):
		return wf.stop(fmt.Errorf("%w: %v", ErrStopped, perr))
	case wf.ctx.Err() != nil:
		return wf.stop(ErrStopped)
	}
	return err
}

func (wf *Workflow) stop(err error) error {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	if wf.stopErr == nil {
		wf.stopErr = err
	}
	return wf.stopErr
}
