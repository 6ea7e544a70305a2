package agent

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// defaultMaxStepBatch bounds one commit so one transaction's locks stay
// short.
const defaultMaxStepBatch = 512

// stepBatcher commits the step records of every connection. Each of its
// committers takes everything that waits when it becomes free and commits
// it in one transaction: when idle a record is committed at once, under load
// many records share a commit.
type stepBatcher struct {
	db         sysdb.SystemDatabase
	committers int
	maxBatch   int
	in         chan *stepRequest
	log        *zap.Logger
}

type stepRequest struct {
	params sysdb.StepRecordParams
	done   chan error
}

func newStepBatcher(db sysdb.SystemDatabase, committers, maxBatch int, log *zap.Logger) *stepBatcher {
	return &stepBatcher{db: db, committers: committers, maxBatch: maxBatch, in: make(chan *stepRequest, 4*defaultMaxStepBatch), log: log}
}

func (b *stepBatcher) start(ctx context.Context, wg *sync.WaitGroup) {
	for i := 0; i < b.committers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.commitLoop(ctx)
		}()
	}
}

// record returns once the step is durable, or with why it is not.
func (b *stepBatcher) record(ctx context.Context, p sysdb.StepRecordParams) error {
	req := &stepRequest{params: p, done: make(chan error, 1)}
	select {
	case b.in <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, the request is committed or failed by a committer; the
	// caller waits for that answer so an acknowledgement always means
	// durable.
	return <-req.done
}

func (b *stepBatcher) commitLoop(ctx context.Context) {
	batch := make([]*stepRequest, 0, b.maxBatch)
	params := make([]sysdb.StepRecordParams, 0, b.maxBatch)
	for {
		batch, params = batch[:0], params[:0]
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
		// The commit outlives a shutdown that starts meanwhile: a record
		// that reached the database must be answered truthfully.
		results, err := b.db.StepRecordMany(context.WithoutCancel(ctx), params)
		for i, r := range batch {
			if err != nil {
				r.done <- err
			} else {
				r.done <- results[i]
			}
		}
	}
}

// failWaiting answers requests still queued at shutdown.
func (b *stepBatcher) failWaiting(err error) {
	for {
		select {
		case req := <-b.in:
			req.done <- err
		default:
			return
		}
	}
}
