// Package metrics exports the engine's state to Prometheus: workflows
// started, finished, recovered and dead-lettered; steps recorded; the
// group-commit batches' sizes and latencies; how long each op's requests
// take in the agent; each queue's depth, running and delayed workflows;
// connected sessions and workers; open waits by kind; the database pool's
// use and retries; frames in and out and error replies by code.
//
// Everything is read from the engine when Prometheus scrapes (agent.Agent's
// Metrics, PoolStats and ListQueues): the engine keeps lock-free counters
// and knows nothing of Prometheus, and the only database call, the queue
// listing, is bounded by a timeout and cached for QueueCacheTTL so that
// scrapes cannot load the database.
//
// Every label has a bounded set of values: statuses, ops, error codes and
// kinds of wait are enumerations, queue names are those registered or holding
// active workflows; no workflow id is ever a label.
//
// Mount it on the admin server's mux:
//
//	mux.Handle("/metrics", metrics.Handler(engine))
//
// Each Handler has its own prometheus.Registry (the engine's collector and
// the Go runtime and process collectors), never the global one, so two
// engines in one process, or tests, do not collide.
package metrics

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

const namespace = "dbos_agent"

// QueueCacheTTL is how long one queue listing answers scrapes: scrapes
// more frequent than this (several Prometheus servers, a dashboard
// refreshing) reuse it rather than each querying the database.
const QueueCacheTTL = time.Second

// QueueListTimeout bounds the queue listing a scrape makes: a slow
// database must not hold the scrape past Prometheus's own timeout.
const QueueListTimeout = 2 * time.Second

// Handler serves the engine's metrics in the Prometheus exposition format
// on a registry of its own (see NewRegistry).
func Handler(engine *agent.Agent) http.Handler {
	return handler(newRegistry(newCollector(engine, time.Now)))
}

func handler(reg *prometheus.Registry) http.Handler {
	// ContinueOnError: a failed queue listing still leaves the rest of
	// the scrape (it is reported as dbos_agent_queue_list_up 0).
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, ErrorHandling: promhttp.ContinueOnError})
}

// NewRegistry returns a registry holding the engine's collector and the Go
// runtime and process collectors, for a caller that serves or gathers it
// itself.
func NewRegistry(engine *agent.Agent) *prometheus.Registry {
	return newRegistry(NewCollector(engine))
}

func newRegistry(engineCollector *Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		engineCollector,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
}

var (
	workflowsStarted      = desc("workflows_started_total", "Workflows created through this agent (started or enqueued).")
	workflowsFinished     = desc("workflows_finished_total", "Workflow outcomes stored through this agent, by status.", "status")
	workflowsRecovered    = desc("workflows_recovered_total", "Unfinished workflows returned to their queues: this executor's at start, and other executors' on a recovery request (POST /dbos-workflow-recovery).")
	workflowsDeadLettered = desc("workflows_dead_lettered_total", "Workflows moved to MAX_RECOVERY_ATTEMPTS_EXCEEDED by this agent.")
	stepsRecorded         = desc("steps_recorded_total", "Steps checkpointed through record_step.")
	batchRecords          = desc("batch_records", "Records per group commit, by batcher (step records, workflow outcomes).", "batcher")
	batchCommitSeconds    = desc("batch_commit_duration_seconds", "Time one group commit took, by batcher.", "batcher")
	queueDepth            = desc("queue_depth", "Workflows ENQUEUED on the queue, waiting to be dequeued.", "queue")
	queueRunning          = desc("queue_running", "Workflows dequeued from the queue and PENDING (running).", "queue")
	queueDelayed          = desc("queue_delayed", "Workflows DELAYED on the queue (released to it later).", "queue")
	queueListUp           = desc("queue_list_up", "1 if the last queue listing succeeded, 0 if the database did not answer it.")
	sessionsOpen          = desc("sessions_open", "Open sessions (connections of workers and clients).")
	workersConnected      = desc("workers_connected", "Connected worker processes.")
	waitsOpen             = desc("waits_open", "Requests waiting, by kind (result, message, event, stream).", "kind")
	poolMaxConns          = desc("db_pool_max_connections", "The system database pool's maximum size.")
	poolConns             = desc("db_pool_connections", "The system database pool's connections, by state (idle, acquired, constructing).", "state")
	poolAcquires          = desc("db_pool_acquires_total", "Connections acquired from the pool.")
	poolEmptyAcquires     = desc("db_pool_empty_acquires_total", "Acquires that waited because the pool had no idle connection.")
	poolCanceledAcquires  = desc("db_pool_canceled_acquires_total", "Acquires abandoned because their context ended.")
	poolAcquireSeconds    = desc("db_pool_acquire_duration_seconds_total", "Total time spent acquiring connections.")
	dbRetries             = desc("db_retries_total", "System database operations repeated after a connection failure.")
	framesReceived        = desc("frames_received_total", "Protocol frames received from peers.")
	framesSent            = desc("frames_sent_total", "Protocol frames queued to peers.")
	frameBytesReceived    = desc("frame_received_bytes_total", "Bytes of protocol frame bodies received from peers.")
	frameBytesSent        = desc("frame_sent_bytes_total", "Bytes of protocol frames queued to peers.")
	requestSeconds        = desc("request_duration_seconds", "Time from reading a request to queueing its reply, by op: what the agent and the database add to a call (a wait's includes its waiting).", "op")
	requestErrors         = desc("request_errors_total", "Error replies sent to peers, by protocol error code name.", "code")
)

// Collector reads the engine's state when Prometheus collects.
type Collector struct {
	engine *agent.Agent

	// mu serializes queue listings: concurrent scrapes wait for one
	// listing rather than each making theirs.
	mu         sync.Mutex
	queues     []agent.QueueState
	queuesErr  error
	queuesRead time.Time
	// now is the clock the queue cache ages by (a test's own clock).
	now func() time.Time
}

// NewCollector returns the engine's collector (NewRegistry registers it).
func NewCollector(engine *agent.Agent) *Collector { return newCollector(engine, time.Now) }

func newCollector(engine *agent.Agent, now func() time.Time) *Collector {
	return &Collector{engine: engine, now: now}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		workflowsStarted, workflowsFinished, workflowsRecovered, workflowsDeadLettered, stepsRecorded,
		batchRecords, batchCommitSeconds, queueDepth, queueRunning, queueDelayed, queueListUp,
		sessionsOpen, workersConnected, waitsOpen, poolMaxConns, poolConns, poolAcquires,
		poolEmptyAcquires, poolCanceledAcquires, poolAcquireSeconds, dbRetries,
		framesReceived, framesSent, frameBytesReceived, frameBytesSent, requestSeconds, requestErrors,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.engine.Metrics()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	histogram := func(d *prometheus.Desc, h agent.HistogramSnapshot, label string) {
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, h.Buckets, label)
	}

	counter(workflowsStarted, m.WorkflowsStarted)
	for _, status := range []string{sysdb.StatusSuccess, sysdb.StatusError} {
		counter(workflowsFinished, m.WorkflowsFinished[status], status)
	}
	counter(workflowsRecovered, m.WorkflowsRecovered)
	counter(workflowsDeadLettered, m.WorkflowsDeadLettered)
	counter(stepsRecorded, m.StepsRecorded)
	histogram(batchRecords, m.StepBatches.Sizes, "step")
	histogram(batchCommitSeconds, m.StepBatches.Latency, "step")
	histogram(batchRecords, m.FinishBatches.Sizes, "finish")
	histogram(batchCommitSeconds, m.FinishBatches.Latency, "finish")

	gauge(sessionsOpen, float64(m.Sessions))
	gauge(workersConnected, float64(m.Workers))
	for _, kind := range []string{agent.WaitResult, agent.WaitMessage, agent.WaitEvent, agent.WaitStream} {
		gauge(waitsOpen, float64(m.OpenWaits[kind]), kind)
	}

	counter(framesReceived, m.FramesIn)
	counter(framesSent, m.FramesOut)
	counter(frameBytesReceived, m.BytesIn)
	counter(frameBytesSent, m.BytesOut)
	ops := make([]string, 0, len(m.Requests))
	for op := range m.Requests {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		histogram(requestSeconds, m.Requests[op], op)
	}
	// Every code of the catalog, zeros included, so that a rate over a
	// code that has not occurred yet is 0 rather than absent.
	for _, info := range protocol.Catalog {
		counter(requestErrors, m.ErrorsByCode[info.Code], info.Name)
	}

	if pool, ok := c.engine.PoolStats(); ok {
		gauge(poolMaxConns, float64(pool.MaxConns))
		gauge(poolConns, float64(pool.IdleConns), "idle")
		gauge(poolConns, float64(pool.AcquiredConns), "acquired")
		gauge(poolConns, float64(max(pool.TotalConns-pool.IdleConns-pool.AcquiredConns, 0)), "constructing")
		counter(poolAcquires, uint64(pool.AcquireCount))
		counter(poolEmptyAcquires, uint64(pool.EmptyAcquireCount))
		counter(poolCanceledAcquires, uint64(pool.CanceledAcquireCount))
		ch <- prometheus.MustNewConstMetric(poolAcquireSeconds, prometheus.CounterValue, pool.AcquireDuration.Seconds())
		counter(dbRetries, pool.Retries)
	}

	queues, err := c.listQueues()
	if err != nil {
		gauge(queueListUp, 0)
		return
	}
	gauge(queueListUp, 1)
	for _, q := range queues {
		gauge(queueDepth, float64(q.Enqueued), q.Name)
		gauge(queueRunning, float64(q.Pending), q.Name)
		gauge(queueDelayed, float64(q.Delayed), q.Name)
	}
}

// listQueues returns the queues' load, listed at most once per
// QueueCacheTTL.
func (c *Collector) listQueues() ([]agent.QueueState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.queuesRead.IsZero() && c.now().Sub(c.queuesRead) < QueueCacheTTL {
		return c.queues, c.queuesErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), QueueListTimeout)
	defer cancel()
	c.queues, c.queuesErr = c.engine.ListQueues(ctx, agent.ListQueuesParams{})
	c.queuesRead = c.now()
	return c.queues, c.queuesErr
}
