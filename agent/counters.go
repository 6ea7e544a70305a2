package agent

import (
	"math"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// counters are the engine's monotonic counts for operators (the metrics
// package exports them). Each is an atomic bumped outside every lock: the
// hot paths (record_step, frames) pay one uncontended add, and whoever
// reads them does so at scrape time through Metrics.
type counters struct {
	workflowsStarted      atomic.Uint64
	workflowsSucceeded    atomic.Uint64
	workflowsFailed       atomic.Uint64
	workflowsRecovered    atomic.Uint64
	workflowsDeadLettered atomic.Uint64
	stepsRecorded         atomic.Uint64
	framesIn              atomic.Uint64
	framesOut             atomic.Uint64
	bytesIn               atomic.Uint64
	bytesOut              atomic.Uint64
	// errorsByCode is indexed by protocol.Code; codes are small and never
	// renumbered, so an array keeps the bump lock-free.
	errorsByCode [maxCountedCode]atomic.Uint64
}

// maxCountedCode bounds the codes counted (every catalog code is below it).
const maxCountedCode = 512

func (c *counters) countError(code protocol.Code) {
	if int(code) < maxCountedCode {
		c.errorsByCode[code].Add(1)
	}
}

// batchBounds are the batch-size histogram's upper bounds (records); the
// last is the default MaxStepBatch.
var batchBounds = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}

// latencyBounds are the commit-latency histogram's upper bounds (seconds).
var latencyBounds = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// requestBounds are the request-duration histogram's upper bounds
// (seconds): finer than a commit's at the low end, where a step's
// round trip through the agent lies, and long enough for a wait.
var requestBounds = []float64{.0001, .00025, .0005, .001, .002, .004, .008, .016, .032, .064, .125, .25, .5, 1, 2.5, 5, 10, 30, 60}

// histogram is a fixed-bucket histogram of atomics: the agent must not
// depend on a metrics library, and a commit observes it once per batch,
// not per record.
type histogram struct {
	bounds []float64
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	count  atomic.Uint64
	// sumBits holds the float64 sum; it is updated by compare-and-swap.
	sumBits atomic.Uint64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.counts[i].Add(1)
	h.count.Add(1)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// HistogramSnapshot is a histogram's state: Buckets maps each upper bound
// to the cumulative count of observations at or below it.
type HistogramSnapshot struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

func (h *histogram) snapshot() HistogramSnapshot {
	s := HistogramSnapshot{Buckets: make(map[float64]uint64, len(h.bounds))}
	var cumulative uint64
	for i, b := range h.bounds {
		cumulative += h.counts[i].Load()
		s.Buckets[b] = cumulative
	}
	// Count and sum are read after the buckets and may run ahead of them
	// by the observations made meanwhile; count is at least the buckets'
	// total so the exposition stays consistent.
	s.Count = max(h.count.Load(), cumulative)
	s.Sum = math.Float64frombits(h.sumBits.Load())
	return s
}

// batchStats observe one batcher's commits.
type batchStats struct {
	sizes   *histogram
	latency *histogram
}

func newBatchStats() *batchStats {
	return &batchStats{sizes: newHistogram(batchBounds), latency: newHistogram(latencyBounds)}
}

func (b *batchStats) observe(size int, took time.Duration) {
	if b == nil {
		return
	}
	b.sizes.observe(float64(size))
	b.latency.observe(took.Seconds())
}

// BatchSnapshot is one batcher's commits: their sizes (records) and
// latencies (seconds).
type BatchSnapshot struct {
	Sizes   HistogramSnapshot
	Latency HistogramSnapshot
}

// requestStats time the requests of each op, from the frame read to the
// reply queued. The ops are the handlers' (a fixed set), so the map is
// built once and read without a lock.
type requestStats map[string]*histogram

func newRequestStats() requestStats {
	r := make(requestStats, len(handlers))
	for op := range handlers {
		r[op] = newHistogram(requestBounds)
	}
	return r
}

func (r requestStats) observe(op string, took time.Duration) {
	if h := r[op]; h != nil {
		h.observe(took.Seconds())
	}
}

// Kinds of open waits, as Metrics reports them.
const (
	WaitResult  = "result"
	WaitMessage = "message"
	WaitEvent   = "event"
	WaitStream  = "stream"
)

// Metrics is the engine's state for an operator's metrics, read at once:
// counts since the agent started and the current load. Every map has a
// bounded key set (statuses, error codes, kinds of wait).
type Metrics struct {
	WorkflowsStarted uint64
	// WorkflowsFinished counts outcomes stored through this agent by
	// status (SUCCESS, ERROR).
	WorkflowsFinished     map[string]uint64
	WorkflowsRecovered    uint64
	WorkflowsDeadLettered uint64
	StepsRecorded         uint64
	FramesIn, FramesOut   uint64
	BytesIn, BytesOut     uint64
	// ErrorsByCode counts error replies by code (only codes that occurred).
	ErrorsByCode  map[protocol.Code]uint64
	StepBatches   BatchSnapshot
	FinishBatches BatchSnapshot
	// Requests times the requests answered, by op (every op the agent
	// handles, zeros included): from reading the frame to queueing its
	// reply, so what the agent and the database add to a call.
	Requests map[string]HistogramSnapshot
	Sessions int
	Workers  int
	// OpenWaits counts requests waiting by kind (WaitResult, ...).
	OpenWaits map[string]int
}

// Metrics reads the engine's counters and load. It takes the engine's locks
// only briefly and makes no database call (see PoolStats and ListQueues for
// those).
func (a *Agent) Metrics() Metrics {
	c := &a.counters
	m := Metrics{
		WorkflowsStarted: c.workflowsStarted.Load(),
		WorkflowsFinished: map[string]uint64{
			sysdb.StatusSuccess: c.workflowsSucceeded.Load(),
			sysdb.StatusError:   c.workflowsFailed.Load(),
		},
		WorkflowsRecovered:    c.workflowsRecovered.Load(),
		WorkflowsDeadLettered: c.workflowsDeadLettered.Load(),
		StepsRecorded:         c.stepsRecorded.Load(),
		FramesIn:              c.framesIn.Load(),
		FramesOut:             c.framesOut.Load(),
		BytesIn:               c.bytesIn.Load(),
		BytesOut:              c.bytesOut.Load(),
		ErrorsByCode:          map[protocol.Code]uint64{},
		StepBatches:           BatchSnapshot{Sizes: a.stepStats.sizes.snapshot(), Latency: a.stepStats.latency.snapshot()},
		FinishBatches:         BatchSnapshot{Sizes: a.finishStats.sizes.snapshot(), Latency: a.finishStats.latency.snapshot()},
		OpenWaits:             map[string]int{WaitResult: 0, WaitMessage: 0, WaitEvent: 0, WaitStream: 0},
		Requests:              make(map[string]HistogramSnapshot, len(a.requestStats)),
	}
	for op, h := range a.requestStats {
		m.Requests[op] = h.snapshot()
	}
	for code := range c.errorsByCode {
		if n := c.errorsByCode[code].Load(); n > 0 {
			m.ErrorsByCode[protocol.Code(code)] = n
		}
	}
	a.mu.Lock()
	m.Sessions = len(a.sessions)
	for _, g := range a.groups {
		m.Workers += len(g.workers)
	}
	a.mu.Unlock()
	m.OpenWaits[WaitResult] = a.waiters.open()
	for kind, n := range a.signals.open() {
		m.OpenWaits[kind] = n
	}
	return m
}

// PoolStats reports the system database's connection pool, when its
// backend has one (Postgres does; SQLite does not).
func (a *Agent) PoolStats() (sysdb.PoolStats, bool) {
	if p, ok := a.db.(sysdb.PoolStatsReporter); ok {
		return p.PoolStats(), true
	}
	return sysdb.PoolStats{}, false
}

// open counts the requests waiting for an outcome.
func (w *waiters) open() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, set := range w.byID {
		n += len(set)
	}
	return n
}

// open counts the requests waiting by kind (the key's prefix).
func (s *signals) open() map[string]int {
	counts := map[string]int{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, set := range s.byKey {
		kind, _, _ := strings.Cut(key, ":")
		switch kind {
		case "m":
			counts[WaitMessage] += len(set)
		case "e":
			counts[WaitEvent] += len(set)
		case "s":
			counts[WaitStream] += len(set)
		}
	}
	return counts
}
