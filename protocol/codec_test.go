package protocol

import (
	"bytes"
	"encoding/hex"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func envelopeBytes(fields ...kv) []byte { return appendValue(nil, omap(fields)) }

func TestEncoderLayout(t *testing.T) {
	t.Parallel()
	enc := NewEncoder()

	frame, err := enc.Request(7, OpPing, Empty{})
	require.NoError(t, err)
	require.Equal(t, "0000001984a46b696e6401a2696407a26f70a470696e67a4626f647980", hex.EncodeToString(frame))

	frame, err = enc.Response(7, nil)
	require.NoError(t, err)
	require.Equal(t, AppendFrame(nil, envelopeBytes(kv{"kind", int64(2)}, kv{"id", int64(7)})), frame,
		"a response without body has no body field")

	frame, err = enc.Push(PushCancel, &CancelPush{WorkflowID: "w"})
	require.NoError(t, err)
	require.Equal(t, AppendFrame(nil, envelopeBytes(kv{"kind", int64(3)}, kv{"id", int64(0)}, kv{"op", "cancel"},
		kv{"body", omap{{"workflow_id", "w"}}})), frame, "pushes carry id 0")

	perr := &Error{Code: CodeTimeout, Message: "late"}
	frame, err = enc.ErrorResponse(1<<40, perr)
	require.NoError(t, err)
	require.Equal(t, "timeout", perr.Name, "the name is filled in from the catalog")
	require.Equal(t, AppendFrame(nil, envelopeBytes(kv{"kind", int64(2)}, kv{"id", int64(1 << 40)},
		kv{"error", omap{{"code", int64(207)}, {"name", "timeout"}, {"message", "late"}}})), frame)
}

func TestEncoderSurvivesABodyItCannotEncode(t *testing.T) {
	t.Parallel()
	enc := NewEncoder()
	_, err := enc.Request(1, OpPing, map[string]any{"c": make(chan int)})
	require.Error(t, err)
	frame, err := enc.Request(2, OpPing, Empty{})
	require.NoError(t, err)
	env, err := DecodeEnvelope(frame[4:])
	require.NoError(t, err)
	require.Equal(t, uint64(2), env.ID)
}

// Error.Data is a map: its keys are written sorted, so that a frame's bytes
// depend on its content only.
func TestEncoderWritesMapKeysSorted(t *testing.T) {
	t.Parallel()
	perr := &Error{Code: CodeUnexpectedStep, Message: "m", Data: map[string]any{
		"recorded": "a", "attempted": "b", "function_id": 3, "workflow_id": "w", "zeta": nil, "alpha": true,
	}}
	first, err := NewEncoder().ErrorResponse(1, perr)
	require.NoError(t, err)
	first = append([]byte(nil), first...)
	for i := 0; i < 50; i++ {
		again, err := NewEncoder().ErrorResponse(1, perr)
		require.NoError(t, err)
		require.Equal(t, first, again)
	}
	whole, err := readValue(first[4:])
	require.NoError(t, err)
	var keys []string
	for _, e := range whole.(omap).get("error").(omap).get("data").(omap) {
		keys = append(keys, e.k)
	}
	require.Equal(t, []string{"alpha", "attempted", "function_id", "recorded", "workflow_id", "zeta"}, keys)
}

// The returned frame is the Encoder's buffer: valid until its next call,
// which writes over it rather than allocating another.
func TestEncoderReusesItsBuffer(t *testing.T) {
	t.Parallel()
	enc := NewEncoder()
	msg := &RecordStep{WorkflowID: "w", OwnerXID: "o", Step: Step{FunctionID: 1, Name: "s", Output: strp("x")}}
	first, err := enc.Request(1, OpRecordStep, msg)
	require.NoError(t, err)
	second, err := enc.Request(2, OpRecordStep, msg)
	require.NoError(t, err)
	require.Equal(t, &first[0], &second[0])
	env, err := DecodeEnvelope(second[4:])
	require.NoError(t, err)
	require.Equal(t, uint64(2), env.ID)
}

func TestDecodeEnvelopeAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   []byte
		want Envelope
	}{
		{"request", envelopeBytes(kv{"kind", int64(1)}, kv{"id", int64(5)}, kv{"op", "ping"}, kv{"body", omap{}}),
			Envelope{Kind: KindRequest, ID: 5, Op: "ping", Body: []byte{0x80}}},
		{"request without body", envelopeBytes(kv{"kind", int64(1)}, kv{"id", int64(5)}, kv{"op", "ping"}),
			Envelope{Kind: KindRequest, ID: 5, Op: "ping"}},
		{"fields in any order", envelopeBytes(kv{"body", omap{}}, kv{"op", "ping"}, kv{"id", int64(5)}, kv{"kind", int64(1)}),
			Envelope{Kind: KindRequest, ID: 5, Op: "ping", Body: []byte{0x80}}},
		{"response without op", envelopeBytes(kv{"kind", int64(2)}, kv{"id", int64(5)}, kv{"body", "anything"}),
			Envelope{Kind: KindResponse, ID: 5, Body: []byte{0xa8, 'a', 'n', 'y', 't', 'h', 'i', 'n', 'g'}}},
		{"unknown envelope fields are skipped, whatever they hold",
			envelopeBytes(kv{"kind", int64(3)}, kv{"future", omap{{"a", []any{int64(1), omap{{"b", nil}}}}}}, kv{"id", int64(0)},
				kv{"op", "run"}, kv{"also_new", 1.5}),
			Envelope{Kind: KindPush, Op: "run"}},
		{"error nil is no error", envelopeBytes(kv{"kind", int64(2)}, kv{"id", int64(5)}, kv{"error", nil}),
			Envelope{Kind: KindResponse, ID: 5}},
		{"error with data", envelopeBytes(kv{"kind", int64(2)}, kv{"id", int64(5)},
			kv{"error", omap{{"code", int64(203)}, {"name", "fenced"}, {"message", "m"}, {"data", omap{{"status", "SUCCESS"}}}}}),
			Envelope{Kind: KindResponse, ID: 5, Error: &Error{Code: CodeFenced, Name: "fenced", Message: "m", Data: map[string]any{"status": "SUCCESS"}}}},
		{"wide and signed encodings of kind and id", envelopeBytes(kv{"kind", wideInt{0xd3, 1}}, kv{"id", wideInt{0xd0, 127}}, kv{"op", "ping"}),
			Envelope{Kind: KindRequest, ID: 127, Op: "ping"}},
		{"the largest id", envelopeBytes(kv{"kind", int64(2)}, kv{"id", uint64(1<<64 - 1)}),
			Envelope{Kind: KindResponse, ID: 1<<64 - 1}},
		{"sixteen fields", envelopeBytes(append([]kv{{"kind", int64(2)}, {"id", int64(1)}},
			kv{"x1", 1.0}, kv{"x2", 1.0}, kv{"x3", 1.0}, kv{"x4", 1.0}, kv{"x5", 1.0}, kv{"x6", 1.0}, kv{"x7", 1.0},
			kv{"x8", 1.0}, kv{"x9", 1.0}, kv{"x10", 1.0}, kv{"x11", 1.0}, kv{"x12", 1.0}, kv{"x13", 1.0}, kv{"x14", 1.0})...),
			Envelope{Kind: KindResponse, ID: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeEnvelope(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestDecodeEnvelopeBodyAliasesTheFrame(t *testing.T) {
	t.Parallel()
	in := envelopeBytes(kv{"kind", int64(1)}, kv{"id", int64(5)}, kv{"op", "ping"}, kv{"body", omap{{"a", "b"}}})
	env, err := DecodeEnvelope(in)
	require.NoError(t, err)
	require.Equal(t, appendValue(nil, omap{{"a", "b"}}), env.Body)
	require.Equal(t, &in[len(in)-len(env.Body)], &env.Body[0], "no copy")
	require.Equal(t, len(env.Body), cap(env.Body), "appending to Body cannot overwrite the frame")
}

func TestDecodeEnvelopeRefuses(t *testing.T) {
	t.Parallel()
	kind1, id1, ping := kv{"kind", int64(1)}, kv{"id", int64(1)}, kv{"op", "ping"}
	tooMany := []kv{kind1, id1, ping}
	for i := 0; i < 14; i++ {
		tooMany = append(tooMany, kv{string(rune('a' + i)), nil})
	}
	// bodyless is an envelope whose body value is still to be appended.
	bodyless := func() []byte {
		e := envelopeBytes(kind1, id1, ping, kv{"body", nil})
		return e[:len(e)-1]
	}
	deep := any("leaf")
	for i := 0; i < MaxDepth; i++ { // with the envelope: MaxDepth+1 levels
		deep = []any{deep}
	}
	for _, tc := range []struct {
		name, why string
		in        []byte
		// What the envelope says of the kind and id despite the error:
		// they are read wherever the frame is well-formed enough to reach
		// them, so that a request is answered with its own id.
		kind Kind
		id   uint64
	}{
		{"empty frame", "", nil, 0, 0},
		{"not msgpack", "0xc1", []byte{0xc1}, 0, 0},
		{"an array, not a map", "not a map", appendValue(nil, []any{int64(1), int64(2)}), 0, 0},
		{"a string, not a map", "not a map", appendValue(nil, "hello"), 0, 0},
		{"no kind, no id", "needs kind and id", envelopeBytes(), 0, 0},
		{"no id", "needs kind and id", envelopeBytes(kind1, ping), KindRequest, 0},
		{"no kind", "needs kind and id", envelopeBytes(id1, ping), 0, 1},
		{"kind nil", "kind: not an integer", envelopeBytes(kv{"kind", nil}, id1, ping), 0, 1},
		{"kind a string", "kind: not an integer", envelopeBytes(kv{"kind", "request"}, id1, ping), 0, 1},
		{"kind a fraction", "kind: 1.5 is not an integer", envelopeBytes(kv{"kind", 1.5}, id1, ping), 0, 1},
		{"kind a float of no kind", "unknown kind 4", envelopeBytes(kv{"kind", 4.0}, id1, ping), 0, 1},
		{"id a fraction", "id: 1.5 is not an integer", envelopeBytes(kind1, kv{"id", 1.5}, ping), KindRequest, 0},
		{"id NaN", "id: NaN is not an integer", envelopeBytes(kind1, kv{"id", math.NaN()}, ping), KindRequest, 0},
		{"id an infinity", "id: +Inf is not an integer", envelopeBytes(kind1, kv{"id", math.Inf(1)}, ping), KindRequest, 0},
		{"id a negative float", "id: -1 is out of range", envelopeBytes(kind1, kv{"id", -1.0}, ping), KindRequest, 0},
		{"id 2^64 as a float", "id: 1.8446744073709552e+19 is out of range", envelopeBytes(kind1, kv{"id", 0x1p64}, ping), KindRequest, 0},
		{"request id 0.0", "0 is reserved", envelopeBytes(kind1, kv{"id", 0.0}, ping), KindRequest, 0},
		{"kind 0", "unknown kind 0", envelopeBytes(kv{"kind", int64(0)}, id1, ping), 0, 1},
		{"kind 4", "unknown kind 4", envelopeBytes(kv{"kind", int64(4)}, id1, ping), 0, 1},
		{"kind 257 (1 modulo 256)", "unknown kind 257", envelopeBytes(kv{"kind", int64(257)}, id1, ping), 0, 1},
		{"kind negative", "kind: -255 is negative", envelopeBytes(kv{"kind", int64(-255)}, id1, ping), 0, 1},
		{"id nil", "id: not an integer", envelopeBytes(kind1, kv{"id", nil}, ping), KindRequest, 0},
		{"id negative", "id: -1 is negative", envelopeBytes(kind1, kv{"id", int64(-1)}, ping), KindRequest, 0},
		{"id a string", "id: not an integer", envelopeBytes(kind1, kv{"id", "1"}, ping), KindRequest, 0},
		{"request id 0", "0 is reserved", envelopeBytes(kind1, kv{"id", int64(0)}, ping), KindRequest, 0},
		{"op an integer", "op:", envelopeBytes(kind1, id1, kv{"op", int64(3)}), KindRequest, 1},
		{"request without op", "needs an op", envelopeBytes(kind1, id1), KindRequest, 1},
		{"push without op", "needs an op", envelopeBytes(kv{"kind", int64(3)}, kv{"id", int64(0)}), KindPush, 0},
		{"request with an empty op", "needs an op", envelopeBytes(kind1, id1, kv{"op", ""}), KindRequest, 1},
		{"error a string", "error:", envelopeBytes(kv{"kind", int64(2)}, id1, kv{"error", "bad"}), KindResponse, 1},
		{"error code a string", "error:", envelopeBytes(kv{"kind", int64(2)}, id1, kv{"error", omap{{"code", "x"}}}), KindResponse, 1},
		{"a key that is not a string", "envelope key", append([]byte{0x83, 0x01, 0x01}, envelopeBytes(kind1, id1)[1:]...), 0, 0},
		{"a key that is not a string after the id", "envelope key",
			append(envelopeBytes(kind1, id1, ping)[:len(envelopeBytes(kind1, id1, ping))-len(appendValue(nil, "op"))-len(appendValue(nil, "ping"))], 0x01, 0x01), KindRequest, 1},
		{"seventeen fields", "17 fields", envelopeBytes(tooMany...), 0, 0},
		{"trailing bytes", "trailing bytes", append(envelopeBytes(kind1, id1, ping), 0xc0), KindRequest, 1},
		{"truncated inside the id", "ends inside", envelopeBytes(kind1, kv{"id", int64(1000)}, ping)[:11], KindRequest, 0},
		{"truncated after the id", "ends inside", envelopeBytes(kind1, kv{"id", int64(1000)}, ping)[:16], KindRequest, 1000},
		{"nested too deep", "deeper than", envelopeBytes(kind1, id1, ping, kv{"body", deep}), KindRequest, 1},
		{"an array announcing 4G values", "announces 4294967295 values",
			append(bodyless(), 0xdd, 0xff, 0xff, 0xff, 0xff), KindRequest, 1},
		{"a map announcing 64K pairs", "announces 131070 values",
			append(bodyless(), 0xde, 0xff, 0xff, 0x00), KindRequest, 1},
		{"a string announcing 4 GB", "ends inside",
			append(bodyless(), 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'), KindRequest, 1},
		{"the id after the fault", "ends inside",
			append(envelopeBytes(kind1, ping, kv{"body", nil}, id1)[:1], 0xa4, 'b', 'o', 'd', 'y', 0xdb, 0xff, 0xff, 0xff, 0xff), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, err := DecodeEnvelope(tc.in)
			require.ErrorIs(t, err, ErrMalformed)
			require.Contains(t, err.Error(), tc.why)
			require.Equal(t, tc.id, env.ID, "id")
			require.Equal(t, tc.kind, env.Kind, "kind")
		})
	}
}

// Before checkWellFormed, these two frames crashed the process decoding
// them: a deep nesting overflowed the goroutine stack (fatal, not a
// panic), and an array header made the msgpack library allocate what it
// announced.
func TestDecodeSurvivesHostileFrames(t *testing.T) {
	t.Parallel()
	t.Run("ten million nested arrays", func(t *testing.T) {
		t.Parallel()
		in := envelopeBytes(kv{"kind", int64(1)}, kv{"id", int64(1)}, kv{"op", "ping"}, kv{"body", nil})
		in = append(in[:len(in)-1], bytes.Repeat([]byte{0x91}, 10<<20)...)
		in = append(in, 0xc0)
		_, err := DecodeEnvelope(in)
		require.ErrorIs(t, err, ErrMalformed)
	})
	t.Run("a hello announcing 4G workflows", func(t *testing.T) {
		t.Parallel()
		body := append(appendValue(nil, omap{{"workflows", nil}})[:11], 0xdd, 0xff, 0xff, 0xff, 0xff)
		start := time.Now()
		var h Hello
		err := DecodeBody(body, &h)
		require.ErrorIs(t, err, ErrMalformed)
		require.Less(t, time.Since(start), time.Second)
		// The same announcement, with as many bytes behind it as it claims
		// values, is read (and sized by what came, not by what was said).
		body = append(appendValue(nil, omap{{"workflows", nil}})[:11], 0xdc, 0x00, 0x03,
			0x81, 0xa4, 'n', 'a', 'm', 'e', 0xa1, 'a', 0x80, 0xc0)
		require.NoError(t, DecodeBody(body, &h))
		require.Equal(t, []WorkflowRegistration{{Name: "a"}, {}, {}}, h.Workflows)
	})
}

func TestDecodeBody(t *testing.T) {
	t.Parallel()
	t.Run("a missing body is an empty message", func(t *testing.T) {
		t.Parallel()
		var m StartWorkflow
		require.NoError(t, DecodeBody(nil, &m))
		require.Equal(t, StartWorkflow{}, m)
	})
	t.Run("a nil body is an empty message", func(t *testing.T) {
		t.Parallel()
		var m StartWorkflow
		require.NoError(t, DecodeBody([]byte{0xc0}, &m))
		require.Equal(t, StartWorkflow{}, m)
	})
	t.Run("unknown fields are ignored", func(t *testing.T) {
		t.Parallel()
		var m WorkflowRef
		require.NoError(t, DecodeBody(appendValue(nil, omap{{"new", omap{{"x", []any{int64(1)}}}}, {"workflow_id", "w"}}), &m))
		require.Equal(t, WorkflowRef{WorkflowID: "w"}, m)
	})
	t.Run("nil reads as absent", func(t *testing.T) {
		t.Parallel()
		var m StartWorkflow
		require.NoError(t, DecodeBody(appendValue(nil, omap{{"name", "n"}, {"queue_name", nil}, {"inputs", nil}, {"priority", nil}}), &m))
		require.Equal(t, StartWorkflow{Name: "n"}, m)
	})
	t.Run("an integer where a float is expected", func(t *testing.T) {
		t.Parallel()
		var q QueueRegistration
		require.NoError(t, DecodeBody(appendValue(nil, omap{{"name", "q"}, {"rate_limit_period_sec", int64(2)}}), &q))
		require.Equal(t, 2.0, *q.RateLimitPeriodSec)
	})
	for _, tc := range []struct {
		name string
		in   omap
		into any
	}{
		{"a string for an integer", omap{{"function_id", "one"}}, new(RecordStep)},
		{"a float for an integer", omap{{"priority", 1.5}}, new(StartWorkflow)},
		{"an integer for a string", omap{{"name", int64(42)}}, new(StartWorkflow)},
		{"an integer for a bool", omap{{"run_here", int64(1)}}, new(StartWorkflow)},
		{"an array for a string", omap{{"workflow_id", []any{int64(1)}}}, new(GetResult)},
		{"a map for a list", omap{{"status", omap{}}}, new(ListWorkflows)},
		{"a string for a nested message", omap{{"run", "grant"}}, new(StartWorkflowReply)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := DecodeBody(appendValue(nil, tc.in), tc.into)
			require.ErrorIs(t, err, ErrMalformed)
		})
	}
	t.Run("a body that is not a map", func(t *testing.T) {
		t.Parallel()
		require.ErrorIs(t, DecodeBody(appendValue(nil, "not a map"), new(StartWorkflow)), ErrMalformed)
	})
	t.Run("trailing bytes", func(t *testing.T) {
		t.Parallel()
		require.ErrorIs(t, DecodeBody(append(appendValue(nil, omap{{"workflow_id", "w"}}), 0xc0), new(WorkflowRef)), ErrMalformed)
	})
	t.Run("into a generic map", func(t *testing.T) {
		t.Parallel()
		var m map[string]any
		require.NoError(t, DecodeBody(appendValue(nil, omap{{"a", []any{int64(1), "x", nil}}, {"b", omap{{"c", true}}}}), &m))
		require.Equal(t, map[string]any{"a": []any{int8(1), "x", nil}, "b": map[string]any{"c": true}}, m)
	})
}

func TestNegotiateVersion(t *testing.T) {
	t.Parallel()
	// The agent of this package.
	v, ok := NegotiateVersion(1, 1)
	require.True(t, ok)
	require.Equal(t, Version, v)

	// The rule, for an agent speaking 2 to 4.
	for _, tc := range []struct {
		min, max uint32
		want     uint32 // 0: none in common
	}{
		{1, 1, 0},
		{1, 2, 2},
		{1, 9, 4},
		{2, 4, 4},
		{3, 3, 3},
		{3, 0, 3}, // no max: min alone
		{4, 9, 4},
		{5, 9, 0},
		{0, 0, 0}, // no versions at all
		{0, 3, 3},
		{4, 2, 0}, // min above max
	} {
		got, ok := negotiate(tc.min, tc.max, 2, 4)
		require.Equal(t, tc.want != 0, ok, "client %d..%d", tc.min, tc.max)
		require.Equal(t, tc.want, got, "client %d..%d", tc.min, tc.max)
	}
}

func TestCheckWellFormed(t *testing.T) {
	t.Parallel()
	nest := func(levels int) []byte {
		var v any = int64(1)
		for i := 0; i < levels; i++ {
			v = []any{v}
		}
		return appendValue(nil, v)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"every scalar type", []byte{0x9f, // an array of 15
			0x00, 0xff, 0xc0, 0xc2, 0xc3,
			0xcc, 1, 0xcd, 1, 2, 0xce, 1, 2, 3, 4, 0xcf, 1, 2, 3, 4, 5, 6, 7, 8,
			0xd0, 1, 0xd1, 1, 2, 0xd2, 1, 2, 3, 4, 0xd3, 1, 2, 3, 4, 5, 6, 7, 8,
			0xca, 1, 2, 3, 4, 0xcb, 1, 2, 3, 4, 5, 6, 7, 8},
			true},
		{"strings and binaries", []byte{0x96, 0xa1, 'a', 0xd9, 1, 'b', 0xda, 0, 1, 'c', 0xdb, 0, 0, 0, 1, 'd',
			0xc4, 1, 'e', 0xc5, 0, 1, 'f'}, true},
		{"bin 32", []byte{0xc6, 0, 0, 0, 2, 'a', 'b'}, true},
		{"extensions", []byte{0x98, 0xd4, 1, 'a', 0xd5, 1, 'a', 'b', 0xd6, 1, 1, 2, 3, 4, 0xd7, 1, 1, 2, 3, 4, 5, 6, 7, 8,
			0xd8, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
			0xc7, 1, 1, 'a', 0xc8, 0, 1, 1, 'a', 0xc9, 0, 0, 0, 1, 1, 'a'}, true},
		{"maps 16 and 32", []byte{0x92, 0xde, 0, 1, 0xa1, 'k', 0x01, 0xdf, 0, 0, 0, 1, 0xa1, 'k', 0x01}, true},
		{"arrays 16 and 32", []byte{0x92, 0xdc, 0, 1, 0x01, 0xdd, 0, 0, 0, 1, 0x01}, true},
		{"empty containers", []byte{0x92, 0x80, 0x90}, true},
		{"MaxDepth levels", nest(MaxDepth), true},
		{"MaxDepth+1 levels", nest(MaxDepth + 1), false},
		{"empty", nil, false},
		{"two values", []byte{0x01, 0x02}, false},
		{"0xc1", []byte{0xc1}, false},
		{"a map missing its last value", []byte{0x81, 0xa1, 'k'}, false},
		{"a truncated length", []byte{0xda, 0}, false},
		{"a truncated uint64", []byte{0xcf, 1, 2, 3}, false},
		{"a truncated fixext", []byte{0xd8, 1, 2}, false},
		{"an ext whose type byte is missing", []byte{0xc7, 0}, false},
		{"a string longer than the frame", []byte{0xa5, 'a'}, false},
		{"an array longer than the frame", []byte{0xdc, 0, 3, 1, 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkWellFormed(tc.in)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
}

// A malformed frame whose key's header claims far more bytes than the frame
// holds costs the decoder what the frame holds, however often it comes: the
// pooled decoders' buffers do not grow with the claims (they grew by a
// quarter on each such frame, gigabytes within a few hundred frames).
func TestHugeLengthClaimsDoNotGrowDecoders(t *testing.T) {
	// {kind: 1, id: 36, <bin32 of 1.87 GB>...}: the key's header is a lie.
	frame := []byte("\x84\xa4kind\x01\xa2id$\xc6op\xaelist_schedule\x1b\xa4body\x90")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 200 {
		_, err := DecodeEnvelope(frame)
		require.ErrorIs(t, err, ErrMalformed)
	}
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20),
		"200 decodes of a %d-byte frame allocated %d MiB", len(frame), (after.TotalAlloc-before.TotalAlloc)>>20)
}
