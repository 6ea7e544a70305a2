package metrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dbos-agent/dbos-agent/agent"
	"github.com/dbos-agent/dbos-agent/internal/pgtest"
	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startEngine runs an engine on a fresh schema of the test database; it is
// shut down when the test ends.
func startEngine(t *testing.T) *agent.Agent {
	t.Helper()
	db, err := sysdb.OpenPostgres(t.Context(), pgtest.URL(t), sysdb.PostgresOptions{Schema: pgtest.Schema(t), MaxConns: 8})
	require.NoError(t, err)
	a, err := agent.New(agent.Config{DB: db, Notifications: db, ExecutorID: "metrics-test",
		PollInterval: 50 * time.Millisecond, GracePeriod: time.Second, ShutdownTimeout: 5 * time.Second})
	require.NoError(t, err)
	require.NoError(t, a.Start(t.Context()))
	t.Cleanup(func() {
		a.Shutdown(context.Background())
		db.Close()
	})
	return a
}

// peer is an in-process connection to the engine speaking the protocol, as
// the socket server feeds a session.
type peer struct {
	t       *testing.T
	s       *agent.Session
	enc     *protocol.Encoder
	mu      sync.Mutex
	nextID  uint64
	replies map[uint64]chan protocol.Envelope
	done    chan struct{}
}

type outboundReader struct{ s *agent.Session }

func (r outboundReader) Read(buf []byte) (int, error) { return r.s.TakeOutbound(buf) }

func connect(t *testing.T, a *agent.Agent, hello protocol.Hello) *peer {
	t.Helper()
	p := &peer{t: t, s: a.NewSession("metrics-test"), enc: protocol.NewEncoder(),
		replies: map[uint64]chan protocol.Envelope{}, done: make(chan struct{})}
	go p.readLoop()
	t.Cleanup(func() {
		p.s.Close()
		<-p.done
	})
	hello.MinVersion, hello.MaxVersion = protocol.MinVersion, protocol.Version
	p.call(protocol.OpHello, hello, &protocol.HelloReply{})
	return p
}

func (p *peer) readLoop() {
	defer close(p.done)
	frames := protocol.NewFrameReader(outboundReader{p.s}, 1<<30)
	for {
		body, err := frames.Next()
		if err != nil {
			return // the session closed
		}
		env, err := protocol.DecodeEnvelope(append([]byte(nil), body...))
		if err != nil {
			p.t.Errorf("the agent wrote a malformed frame: %v", err)
			return
		}
		if env.Kind == protocol.KindPush {
			continue
		}
		p.mu.Lock()
		ch := p.replies[env.ID]
		delete(p.replies, env.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- env
		}
	}
}

// request sends a request and returns its reply.
func (p *peer) request(op string, body any) protocol.Envelope {
	p.t.Helper()
	select {
	case env := <-p.send(op, body):
		return env
	case <-time.After(30 * time.Second):
		p.t.Fatalf("%s: no reply within 30s", op)
		return protocol.Envelope{}
	}
}

// send sends a request and returns the channel its reply arrives on.
func (p *peer) send(op string, body any) <-chan protocol.Envelope {
	p.t.Helper()
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	ch := make(chan protocol.Envelope, 1)
	p.replies[id] = ch
	frame, err := p.enc.Request(id, op, body)
	require.NoError(p.t, err)
	frameBody := append([]byte(nil), frame[4:]...)
	p.mu.Unlock()
	require.NoError(p.t, p.s.HandleFrame(frameBody))
	return ch
}

// call sends a request and decodes its successful reply into out.
func (p *peer) call(op string, body, out any) {
	p.t.Helper()
	env := p.request(op, body)
	require.Nil(p.t, env.Error, "%s answered an error", op)
	require.NoError(p.t, protocol.DecodeBody(env.Body, out))
}

func str(s string) *string { return &s }

// scrape fetches the handler's exposition and parses it.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	require.NoError(t, err)
	return families
}

// value is the sample of family name whose labels include want (a
// histogram's count), or 0 when there is none yet.
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := families[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

func TestMetricsShowStepsFinishedWorkflowsAndQueueDepth(t *testing.T) {
	a := startEngine(t)
	// The queue listing is cached for QueueCacheTTL by this clock, which
	// the test moves on rather than waiting.
	var clockMu sync.Mutex
	clock := time.Now()
	now := func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		return clock
	}
	advance := func() {
		clockMu.Lock()
		defer clockMu.Unlock()
		clock = clock.Add(QueueCacheTTL)
	}
	h := handler(newRegistry(newCollector(a, now)))
	before := scrape(t, h)
	require.Contains(t, before, "go_goroutines", "the Go collector is registered")
	require.Contains(t, before, "process_start_time_seconds", "the process collector is registered")

	worker := connect(t, a, protocol.Hello{Role: protocol.RoleWorker, AppName: "metrics", AppVersion: "v1",
		Workflows: []protocol.WorkflowRegistration{{Name: "wf"}}})
	client := connect(t, a, protocol.Hello{Role: protocol.RoleClient, AppName: "metrics", AppVersion: "v1"})

	const workflows, stepsEach = 3, 4
	for i := range workflows {
		var started protocol.StartWorkflowReply
		worker.call(protocol.OpStartWorkflow, protocol.StartWorkflow{WorkflowID: fmt.Sprintf("run-%d", i), Name: "wf",
			Inputs: str(`[]`), Serialization: "portable_json", RunHere: true}, &started)
		require.NotNil(t, started.Run, "the worker runs its own start")
		for fn := 1; fn <= stepsEach; fn++ {
			env := worker.request(protocol.OpRecordStep, protocol.RecordStep{WorkflowID: started.WorkflowID, OwnerXID: started.Run.OwnerXID,
				Step: protocol.Step{FunctionID: fn, Name: "step", Output: str(`1`), Serialization: "portable_json"}})
			require.Nil(t, env.Error, "record_step answered an error")
		}
		var finished protocol.FinishReply
		worker.call(protocol.OpFinish, protocol.Finish{WorkflowID: started.WorkflowID, OwnerXID: started.Run.OwnerXID,
			Status: sysdb.StatusSuccess, Output: str(`"ok"`), Serialization: "portable_json"}, &finished)
		require.True(t, finished.Applied)
	}
	// No worker serves this queue: the workflow stays ENQUEUED on it.
	var parked protocol.StartWorkflowReply
	client.call(protocol.OpStartWorkflow, protocol.StartWorkflow{WorkflowID: "parked", Name: "unserved",
		Inputs: str(`[]`), Serialization: "portable_json", QueueName: "backlog"}, &parked)
	require.True(t, parked.Created)
	// An error reply, counted by its code's name.
	bad := client.request(protocol.OpFinish, protocol.Finish{WorkflowID: "parked", OwnerXID: "x", Status: "BOGUS"})
	require.NotNil(t, bad.Error)
	require.Equal(t, protocol.CodeInvalidArgument, bad.Error.Code)

	// A client waiting for the parked workflow's result holds an open wait
	// until its session closes. Nothing outside the engine is told when the
	// wait is registered, so the scrape is retried until it shows.
	waiting := client.send(protocol.OpGetResult, protocol.GetResult{WorkflowID: "parked"})
	require.Eventually(t, func() bool {
		return value(scrape(t, h), "dbos_agent_waits_open", map[string]string{"kind": "result"}) == 1
	}, 10*time.Second, 10*time.Millisecond, "the result wait is counted")
	select {
	case env := <-waiting:
		t.Fatalf("the wait for a parked workflow ended: %+v", env)
	default:
	}

	cached := scrape(t, h)
	require.Zero(t, value(cached, "dbos_agent_queue_depth", map[string]string{"queue": "backlog"}),
		"a scrape within QueueCacheTTL of the last reuses its queue listing")
	advance()
	after := scrape(t, h)
	rose := func(name string, labels map[string]string) float64 {
		return value(after, name, labels) - value(before, name, labels)
	}
	require.Equal(t, float64(workflows*stepsEach), rose("dbos_agent_steps_recorded_total", nil))
	require.Equal(t, float64(workflows), rose("dbos_agent_workflows_finished_total", map[string]string{"status": "SUCCESS"}))
	require.Zero(t, rose("dbos_agent_workflows_finished_total", map[string]string{"status": "ERROR"}))
	require.Equal(t, float64(workflows+1), rose("dbos_agent_workflows_started_total", nil))
	require.Equal(t, 1.0, value(after, "dbos_agent_queue_depth", map[string]string{"queue": "backlog"}))
	require.Equal(t, 1.0, value(after, "dbos_agent_queue_list_up", nil))
	require.Equal(t, 1.0, rose("dbos_agent_request_errors_total", map[string]string{"code": "invalid_argument"}))
	require.Equal(t, 2.0, value(after, "dbos_agent_sessions_open", nil))
	require.Equal(t, 1.0, value(after, "dbos_agent_workers_connected", nil))
	require.GreaterOrEqual(t, rose("dbos_agent_batch_records", map[string]string{"batcher": "step"}), 1.0,
		"the step commits are observed")
	require.GreaterOrEqual(t, rose("dbos_agent_batch_commit_duration_seconds", map[string]string{"batcher": "finish"}), 1.0,
		"the finish commits are observed")
	require.Equal(t, float64(workflows*stepsEach), rose("dbos_agent_request_duration_seconds", map[string]string{"op": "record_step"}),
		"every record_step is timed once")
	require.Equal(t, float64(workflows+1), rose("dbos_agent_request_duration_seconds", map[string]string{"op": "finish"}),
		"the finishes are timed, the one answered with an error too")
	require.Equal(t, float64(workflows+1), rose("dbos_agent_request_duration_seconds", map[string]string{"op": "start_workflow"}),
		"the workers' starts and the client's enqueue are timed")
	require.Zero(t, rose("dbos_agent_request_duration_seconds", map[string]string{"op": "send"}), "an op not called has a histogram of zeros")
	require.Contains(t, labelValues(after, "dbos_agent_request_duration_seconds", "op"), "send")
	require.Greater(t, rose("dbos_agent_frames_received_total", nil), float64(workflows*(stepsEach+2)))
	require.Greater(t, rose("dbos_agent_frames_sent_total", nil), float64(workflows*(stepsEach+2)))
	require.Greater(t, value(after, "dbos_agent_db_pool_max_connections", nil), 0.0, "the Postgres pool is reported")
	require.Greater(t, rose("dbos_agent_db_pool_acquires_total", nil), 0.0)
	require.Contains(t, after, "dbos_agent_db_retries_total")
	for _, kind := range []string{"result", "message", "event", "stream"} {
		require.Contains(t, labelValues(after, "dbos_agent_waits_open", "kind"), kind)
	}
}

// labelValues lists the values label takes in family name.
func labelValues(families map[string]*dto.MetricFamily, name, label string) []string {
	var values []string
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				values = append(values, l.GetValue())
			}
		}
	}
	return values
}
