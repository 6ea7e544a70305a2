package agent

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/protocol"
)

// BenchmarkRecordStep is record_step through a session, as a worker sends
// it, committed to a real Postgres: one op is one step, with 16 workflows
// in flight so that steps share commits as they do under load. allocs/op
// counts the whole process: the agent (decode, batch, commit through pgx,
// reply) and the in-process peer, which encodes each request and decodes
// each reply as a binding would (about 10 of them: see the peer row).
func BenchmarkRecordStep(b *testing.B) {
	const inFlight = 16
	bundle := setup(b)
	w := connect(b, bundle.agent, workerHello("wf"))
	runs := make([]*protocol.Run, inFlight)
	for i := range runs {
		var reply protocol.StartWorkflowReply
		w.call(protocol.OpStartWorkflow, protocol.StartWorkflow{WorkflowID: fmt.Sprintf("bench-%d", i), Name: "wf",
			Inputs: str(`[]`), Serialization: "portable_json", RunHere: true}, &reply)
		require.NotNil(b, reply.Run)
		runs[i] = reply.Run
	}
	output := str(`"gASVBQAAAAAAAACMAXiULg=="`)
	var next atomic.Int64
	var fid [inFlight]atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := runs[i]
			for next.Add(1) <= int64(b.N) {
				env := w.await(w.send(protocol.OpRecordStep, protocol.RecordStep{WorkflowID: run.WorkflowID, OwnerXID: run.OwnerXID,
					Step: protocol.Step{FunctionID: int(fid[i].Add(1)), Name: "step", Output: output, Serialization: "py_pickle"}}))
				if env.Error != nil {
					b.Errorf("record_step: %v", env.Error)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkRecordStepPeer is what the in-process peer of BenchmarkRecordStep
// allocates for one step without the agent: the request encoded and copied,
// a reply decoded. BenchmarkRecordStep's allocs/op less this is the agent's.
func BenchmarkRecordStepPeer(b *testing.B) {
	enc := protocol.NewEncoder()
	reply, err := protocol.NewEncoder().Response(1, protocol.Empty{})
	require.NoError(b, err)
	reply = append([]byte(nil), reply[4:]...)
	output := str(`"gASVBQAAAAAAAACMAXiULg=="`)
	b.ReportAllocs()
	for i := range b.N {
		frame, err := enc.Request(uint64(i), protocol.OpRecordStep, protocol.RecordStep{WorkflowID: "bench-0", OwnerXID: "owner",
			Step: protocol.Step{FunctionID: i, Name: "step", Output: output, Serialization: "py_pickle"}})
		if err != nil {
			b.Fatal(err)
		}
		_ = append([]byte(nil), frame[4:]...)
		ch := make(chan protocol.Envelope, 1)
		env, err := protocol.DecodeEnvelope(append([]byte(nil), reply...))
		if err != nil {
			b.Fatal(err)
		}
		ch <- env
		<-ch
	}
}
