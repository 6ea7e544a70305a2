package agent

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The batcher's own contract, over a commit function standing in for the
// database's (the Postgres and SQLite commits have their own tests): what
// answers a submitted write, and when.

var errOdd = errors.New("odd record")

// oddFails commits a batch, failing the odd records one by one: it reports
// the batch's size on sizes and then, when gate is set, waits for it.
func oddFails(gate <-chan struct{}, sizes chan<- int) func(context.Context, []int) ([]batchResult[int], error) {
	return func(_ context.Context, params []int) ([]batchResult[int], error) {
		sizes <- len(params)
		if gate != nil {
			<-gate
		}
		out := make([]batchResult[int], len(params))
		for i, p := range params {
			out[i].value = p * 10
			if p%2 == 1 {
				out[i].err = errOdd
			}
		}
		return out, nil
	}
}

func TestSubmitIsAnsweredByTheCommitThatMadeItDurable(t *testing.T) {
	gate := make(chan struct{})
	sizes := make(chan int, 16)
	b := newBatcher(1, 64, oddFails(gate, sizes))
	sup := newSupervisor()
	b.start(sup, "test batcher")
	t.Cleanup(func() { sup.stop(5 * time.Second) })

	answers := make(chan [2]any, 16)
	submit := func(p int) {
		require.NoError(t, b.submit(context.Background(), p, func(r batchResult[int]) {
			answers <- [2]any{r.value, r.err}
		}))
	}
	submit(0)
	// The one committer holds 0 at the gate: what comes meanwhile waits,
	// and the next commit takes all of it.
	require.Equal(t, 1, <-sizes)
	for p := 1; p <= 5; p++ {
		submit(p)
	}
	select {
	case a := <-answers:
		t.Fatalf("answered before its commit: %v", a)
	default:
	}
	close(gate)
	require.Equal(t, 5, <-sizes, "the writes queued during a commit share the next")
	got := map[int]error{}
	for range 6 {
		a := <-answers
		got[a[0].(int)], _ = a[1].(error)
	}
	require.Equal(t, map[int]error{0: nil, 10: errOdd, 20: nil, 30: errOdd, 40: nil, 50: errOdd}, got,
		"each write gets its own record's answer")
}

func TestSubmitsRacingAStopAreEachAnsweredOnce(t *testing.T) {
	sizes := make(chan int, 1<<16)
	b := newBatcher(2, 8, oddFails(nil, sizes))
	sup := newSupervisor()
	b.start(sup, "test batcher")

	const submitters, each = 8, 500
	var answered, stopped, twice atomic.Int64
	done := make(chan struct{})
	halfway := make(chan struct{})
	var half sync.Once
	var submitted atomic.Int64
	for range submitters {
		go func() {
			for p := range each {
				var calls atomic.Int32
				err := b.submit(context.Background(), p, func(r batchResult[int]) {
					if calls.Add(1) > 1 {
						twice.Add(1)
						return
					}
					if errors.Is(r.err, errBatcherStopped) {
						stopped.Add(1)
					}
					if answered.Add(1) == submitters*each {
						close(done)
					}
				})
				if err != nil {
					t.Error(err)
				}
				if submitted.Add(1) == submitters*each/2 {
					half.Do(func() { close(halfway) })
				}
			}
		}()
	}
	<-halfway
	require.Empty(t, sup.stop(5*time.Second), "the committers end")
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d of %d writes were never answered", submitters*each-int(answered.Load()), submitters*each)
	}
	require.Zero(t, twice.Load(), "no write is answered twice")
	require.Equal(t, int64(submitters*each), answered.Load())

	// After the stop, a write is answered at once, by its submitter.
	before := stopped.Load()
	for p := range 10 {
		var got error
		require.NoError(t, b.submit(context.Background(), p, func(r batchResult[int]) { got = r.err }))
		require.ErrorIs(t, got, errBatcherStopped)
	}
	require.Equal(t, before, stopped.Load())
}

func TestSubmitWithAnEndedContextIsRefusedWhenTheQueueIsFull(t *testing.T) {
	b := newBatcher(1, 1, oddFails(nil, make(chan int, 1)))
	// No committer: the queue fills.
	for range cap(b.in) {
		require.NoError(t, b.submit(context.Background(), 0, func(batchResult[int]) {}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := b.submit(ctx, 0, func(batchResult[int]) { called = true })
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, called, "a write refused is answered by submit's error alone")
}

// concurrentCommits commits at once, noting how many commits were ever in
// flight together; while gate is set, each commit waits for it.
type concurrentCommits struct {
	now, most atomic.Int32
	gate      chan struct{}
	entered   chan int // each commit's size as it begins
}

func (c *concurrentCommits) commit(_ context.Context, params []int) ([]batchResult[int], error) {
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for {
		m := c.most.Load()
		if n <= m || c.most.CompareAndSwap(m, n) {
			break
		}
	}
	if c.entered != nil {
		c.entered <- len(params)
	}
	if c.gate != nil {
		<-c.gate
	}
	return make([]batchResult[int], len(params)), nil
}

func TestWhileCommitsAreQuickOneCommitterCommits(t *testing.T) {
	c := &concurrentCommits{}
	b := newBatcher(4, 8, c.commit)
	b.overflowAfter = time.Hour // no commit is slow
	sup := newSupervisor()
	b.start(sup, "test batcher")
	t.Cleanup(func() { sup.stop(5 * time.Second) })

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range 200 {
				if _, err := b.write(context.Background(), p); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, c.most.Load(), "the other committers start nothing while no commit is slow")
}

func TestASlowCommitLetsTheNextCommitterStartOne(t *testing.T) {
	c := &concurrentCommits{gate: make(chan struct{}), entered: make(chan int, 8)}
	b := newBatcher(2, 8, c.commit)
	b.overflowAfter = time.Millisecond
	sup := newSupervisor()
	b.start(sup, "test batcher")
	t.Cleanup(func() { sup.stop(5 * time.Second) })

	first := make(chan error, 1)
	go func() { _, err := b.write(context.Background(), 1); first <- err }()
	require.Equal(t, 1, <-c.entered)
	// The first commit is held (a locked row): a write that comes now is
	// committed beside it, by the second committer, once the first has
	// been in flight for overflowAfter.
	second := make(chan error, 1)
	go func() { _, err := b.write(context.Background(), 2); second <- err }()
	require.Equal(t, 1, <-c.entered)
	require.EqualValues(t, 2, c.now.Load(), "two commits in flight")
	close(c.gate)
	require.NoError(t, <-first)
	require.NoError(t, <-second)
}
