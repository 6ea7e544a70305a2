package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// errBatcherStopped answers a write that reached the batcher after its
// committers stopped (the agent is shutting down).
var errBatcherStopped = errors.New("the agent is shutting down")

// defaultMaxStepBatch bounds one commit so one transaction's locks stay
// short.
const defaultMaxStepBatch = 512

// defaultOverflowAfter is how long a commit may be in flight before the
// next committer may start one beside it.
const defaultOverflowAfter = 10 * time.Millisecond

// batcher group-commits the writes of every connection: step records, and
// workflow outcomes. A committer takes everything that waits when it
// becomes free and commits it in one transaction: when idle a write is
// committed at once, under load many writes share a commit.
//
// One committer commits while the commits are quick: the writes that come
// during a commit share the next, and a commit's fixed cost dominates the
// database's (measured at 16 and 64 workflows in flight: one committer
// made 1.6x larger batches than two racing ones, and more steps per
// second with less Postgres CPU each). Each further committer (up to
// committers) starts a commit only while the one before it has had one in
// flight for longer than overflowAfter: a commit waiting on a locked
// workflow row, or a slow disk, does not stall every write behind it.
type batcher[P, R any] struct {
	committers    int
	overflowAfter time.Duration
	maxBatch      int
	in            chan *batchRequest[P, R]
	// overflow[k] lets committer k+1 take writes: committer k signals it
	// while a commit of its has been in flight for overflowAfter.
	overflow []chan struct{}
	// stopped is closed once every committer has ended: a write queued
	// after that is answered by its own writer (see write).
	stopped chan struct{}
	live    atomic.Int32
	// commit writes a batch in one transaction and answers each write, in
	// order; its error is for the whole batch (nothing was committed).
	commit func(ctx context.Context, params []P) ([]batchResult[R], error)
	// stats, when set, observes each commit's size and latency.
	stats *batchStats
}

type batchRequest[P, R any] struct {
	params P
	// done receives the answer of a write (write); then, when set instead,
	// is called with the answer of a submit, on the committer's goroutine.
	done chan batchResult[R]
	then func(batchResult[R])
}

// answer gives a request its result.
func (r *batchRequest[P, R]) answer(res batchResult[R]) {
	if r.then != nil {
		r.then(res)
		return
	}
	r.done <- res
}

type batchResult[R any] struct {
	value R
	err   error
}

func newBatcher[P, R any](committers, maxBatch int, commit func(context.Context, []P) ([]batchResult[R], error)) *batcher[P, R] {
	b := &batcher[P, R]{committers: committers, overflowAfter: defaultOverflowAfter, maxBatch: maxBatch,
		in: make(chan *batchRequest[P, R], 4*defaultMaxStepBatch), stopped: make(chan struct{}), commit: commit}
	for range max(committers-1, 0) {
		b.overflow = append(b.overflow, make(chan struct{}, 1))
	}
	return b
}

// newStepBatcher commits step records with StepRecordMany.
func newStepBatcher(db sysdb.SystemDatabase, committers, maxBatch int) *batcher[sysdb.StepRecordParams, struct{}] {
	return newBatcher(committers, maxBatch, func(ctx context.Context, params []sysdb.StepRecordParams) ([]batchResult[struct{}], error) {
		errs, err := db.StepRecordMany(ctx, params)
		if err != nil {
			return nil, err
		}
		results := make([]batchResult[struct{}], len(errs))
		for i, e := range errs {
			results[i].err = e
		}
		return results, nil
	})
}

// newFinishBatcher commits workflow outcomes with WorkflowFinishMany.
func newFinishBatcher(db sysdb.SystemDatabase, committers, maxBatch int) *batcher[sysdb.WorkflowFinishParams, sysdb.WorkflowFinishResult] {
	return newBatcher(committers, maxBatch, func(ctx context.Context, params []sysdb.WorkflowFinishParams) ([]batchResult[sysdb.WorkflowFinishResult], error) {
		outcomes, err := db.WorkflowFinishMany(ctx, params)
		if err != nil {
			return nil, err
		}
		results := make([]batchResult[sysdb.WorkflowFinishResult], len(outcomes))
		for i, o := range outcomes {
			results[i] = batchResult[sysdb.WorkflowFinishResult]{value: o.Result, err: o.Err}
		}
		return results, nil
	})
}

func (b *batcher[P, R]) start(sup *supervisor, name string) {
	b.live.Store(int32(b.committers))
	for i := 0; i < b.committers; i++ {
		if !sup.goCtx(name, func(ctx context.Context) {
			defer b.committerEnded()
			b.commitLoop(ctx, i)
		}) {
			b.committerEnded()
		}
	}
}

func (b *batcher[P, R]) committerEnded() {
	if b.live.Add(-1) == 0 {
		close(b.stopped)
		// A submit queued after the committers' own last drain and before
		// stopped closed has no one waiting to notice: answered here, or
		// by its submitter, who checks stopped after queueing.
		b.failWaiting(errBatcherStopped)
	}
}

// write returns once the write is durable, or with why it is not.
func (b *batcher[P, R]) write(ctx context.Context, p P) (R, error) {
	req := &batchRequest[P, R]{params: p, done: make(chan batchResult[R], 1)}
	select {
	case b.in <- req:
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
	// Once queued, the request is committed or failed by a committer; the
	// caller waits for that answer so an acknowledgement always means
	// durable.
	select {
	case r := <-req.done:
		return r.value, r.err
	case <-b.stopped:
		// No committer is left to take it: answer what still waits
		// (this request among them, unless a committer took it first
		// and so answered it).
		b.failWaiting(errBatcherStopped)
		r := <-req.done
		return r.value, r.err
	}
}

// submit queues a write and returns: then is called with its answer once
// it is durable or has failed, on a committer's goroutine (so it must not
// block), or on this one when the batcher has stopped. It saves a write's
// caller the goroutine that waits: a step record is answered by the commit
// that made it durable. Queueing waits while the batcher's queue is full,
// as write does; it returns ctx's error, and then is not called, when ctx
// ends first.
func (b *batcher[P, R]) submit(ctx context.Context, p P, then func(batchResult[R])) error {
	req := &batchRequest[P, R]{params: p, then: then}
	select {
	case b.in <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-b.stopped:
		b.failWaiting(errBatcherStopped) // this request among them, if no committer took it
	default:
	}
	return nil
}

// record is write for writes that answer nothing but an error.
func (b *batcher[P, R]) record(ctx context.Context, p P) error {
	_, err := b.write(ctx, p)
	return err
}

// commitLoop is committer i's: the first commits whatever waits; each
// other waits, before each commit, for the one before it to have a commit
// in flight for overflowAfter.
func (b *batcher[P, R]) commitLoop(ctx context.Context, i int) {
	batch := make([]*batchRequest[P, R], 0, b.maxBatch)
	params := make([]P, 0, b.maxBatch)
	var slow *time.Timer
	if i < len(b.overflow) {
		next := b.overflow[i]
		slow = time.AfterFunc(time.Hour, func() {
			select {
			case next <- struct{}{}:
			default:
			}
		})
		slow.Stop()
		defer slow.Stop()
	}
	for {
		batch, params = batch[:0], params[:0]
		if i > 0 {
			select {
			case <-b.overflow[i-1]:
			case <-ctx.Done():
				b.failWaiting(ctx.Err())
				return
			}
		}
		select {
		case req := <-b.in:
			batch = append(batch, req)
		case <-ctx.Done():
			b.failWaiting(ctx.Err())
			return
		}
	drain:
		for len(batch) < b.maxBatch {
			select {
			case req := <-b.in:
				batch = append(batch, req)
			default:
				break drain
			}
		}
		for _, r := range batch {
			params = append(params, r.params)
		}
		// The commit outlives a shutdown that starts meanwhile: a write
		// that reached the database must be answered truthfully.
		started := time.Now()
		if slow != nil {
			slow.Reset(b.overflowAfter)
		}
		results, err := b.commit(context.WithoutCancel(ctx), params)
		if slow != nil && !slow.Stop() {
			// It fired: the next committer may take writes once. Unless it
			// already has, this commit's end takes that back.
			select {
			case <-b.overflow[i]:
			default:
			}
		}
		b.stats.observe(len(params), time.Since(started))
		for i, r := range batch {
			if err != nil {
				r.answer(batchResult[R]{err: err})
			} else {
				r.answer(results[i])
			}
		}
	}
}

// failWaiting answers requests still queued at shutdown.
func (b *batcher[P, R]) failWaiting(err error) {
	for {
		select {
		case req := <-b.in:
			req.answer(batchResult[R]{err: err})
		default:
			return
		}
	}
}
