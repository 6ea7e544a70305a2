package agent

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dbos-agent/dbos-agent/protocol"
	"github.com/dbos-agent/dbos-agent/sysdb"
)

// TestSessionRecordsWakeTimesInItsHellosFormat: a connection's durable
// sleeps, and its waits' deadlines, record their wake time as its hello's
// wake_time_format says: epoch seconds (absent, or "epoch_seconds": what
// DBOS Python reads back) or integer epoch ms ("epoch_ms": what DBOS
// TypeScript reads back). A sleep's step is completed at its wake time, a
// deadline's at its registration, as both SDKs record them.
func TestSessionRecordsWakeTimesInItsHellosFormat(t *testing.T) {
	b := setup(t)
	for _, format := range []string{"", protocol.WakeTimeEpochSeconds, protocol.WakeTimeEpochMS} {
		t.Run("format="+format, func(t *testing.T) {
			hello := workerHello("w")
			hello.WakeTimeFormat = format
			p := connect(t, b.agent, hello)
			id := "sleeper-" + format
			run := startHere(t, b.agent, p.s.caller(), id, "w")
			at := func(n int) protocol.Caller {
				return protocol.Caller{WorkflowID: id, OwnerXID: run.OwnerXID, FunctionID: n}
			}
			const hourMS = int64(3_600_000)
			var slept protocol.SleepReply
			p.call(protocol.OpSleep, protocol.Sleep{Caller: at(1), DurationMS: hourMS}, &slept)
			require.Equal(t, hourMS, slept.RemainingMS)
			var got protocol.RecvReply
			p.call(protocol.OpRecv, protocol.Recv{Caller: at(2), TimeoutFunctionID: 3, TimeoutMS: 1, TimeoutOutput: str("null")}, &got)
			require.False(t, got.Received)

			steps, err := b.db.StepList(t.Context(), id)
			require.NoError(t, err)
			require.Len(t, steps, 3)
			sleep, deadline := steps[0], steps[2]
			for _, s := range []sysdb.Step{sleep, deadline} {
				require.Equal(t, sysdb.StepNameSleep, s.Name)
				require.Equal(t, sysdb.PortableJSON, *s.Serialization)
			}
			require.Equal(t, slept.WakeAtEpochMS, *sleep.CompletedAt, "a sleep spans the sleep")
			require.Equal(t, hourMS, *sleep.CompletedAt-*sleep.StartedAt)
			require.Equal(t, *deadline.StartedAt, *deadline.CompletedAt, "a deadline is an instant")

			if format == protocol.WakeTimeEpochMS {
				// DBOS TypeScript reads JSON.parse(output) as epoch ms.
				require.Equal(t, strconv.FormatInt(slept.WakeAtEpochMS, 10), *sleep.Output)
				require.Equal(t, strconv.FormatInt(*deadline.StartedAt+1, 10), *deadline.Output)
			} else {
				// DBOS Python reads float(output) as epoch seconds.
				var seconds float64
				require.NoError(t, json.Unmarshal([]byte(*sleep.Output), &seconds))
				require.InDelta(t, float64(slept.WakeAtEpochMS)/1000, seconds, 0.001)
				require.Less(t, seconds, 1e11)
				require.NoError(t, json.Unmarshal([]byte(*deadline.Output), &seconds))
				require.InDelta(t, float64(*deadline.StartedAt+1)/1000, seconds, 0.001)
			}

			// Sent again (a replay), the sleep keeps its wake time.
			var again protocol.SleepReply
			p.call(protocol.OpSleep, protocol.Sleep{Caller: at(1), DurationMS: 5}, &again)
			require.Equal(t, slept.WakeAtEpochMS, again.WakeAtEpochMS)
		})
	}

	// An unknown format is refused, and the connection may say hello again.
	p := openSession(t, b.agent)
	hello := workerHello("w")
	hello.MinVersion, hello.MaxVersion = protocol.MinVersion, protocol.Version
	hello.WakeTimeFormat = "epoch_minutes"
	refused := p.await(p.send(protocol.OpHello, hello))
	require.NotNil(t, refused.Error)
	require.Equal(t, protocol.CodeInvalidArgument, refused.Error.Code)
	require.Equal(t, `hello.wake_time_format: unknown wake time format: must be "epoch_seconds" (DBOS Python's, the default) or "epoch_ms" (DBOS TypeScript's)`,
		refused.Error.Message)
	hello.WakeTimeFormat = protocol.WakeTimeEpochMS
	var reply protocol.HelloReply
	p.call(protocol.OpHello, hello, &reply)
	require.Equal(t, sysdb.WakeEpochMS, p.s.caller().WakeTimeFormat)
}
