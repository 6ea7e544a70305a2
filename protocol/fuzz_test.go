package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// goldenFrames returns the frame bodies (without length prefix) of the
// golden vectors, to seed the fuzzers.
func goldenFrames(f *testing.F) [][]byte {
	raw, err := os.ReadFile(vectorsFile)
	require.NoError(f, err)
	var vectors []vector
	require.NoError(f, json.Unmarshal(raw, &vectors))
	var out [][]byte
	for _, v := range vectors {
		frame, err := hex.DecodeString(v.Hex)
		require.NoError(f, err)
		out = append(out, frame[4:])
	}
	return out
}

// FuzzDecodeEnvelope feeds arbitrary frame bodies to the decoder. Nothing
// may panic (or crash the process); whatever decodes must encode again,
// and encoding what that decodes to must give the same bytes (the
// encoding is a fixed point).
func FuzzDecodeEnvelope(f *testing.F) {
	for _, frame := range goldenFrames(f) {
		f.Add(frame)
		f.Add(frame[:len(frame)/2])
		f.Add(append(append([]byte{}, frame...), 0xc0))
	}
	for _, junk := range [][]byte{
		nil, {0x80}, {0xc1}, {0x90}, {0x81, 0xa4, 'k', 'i', 'n', 'd', 0xa3, 'b', 'a', 'd'},
		[]byte("GET / HTTP/1.1\r\n\r\n"),
		bytes.Repeat([]byte{0x91}, 100),
		{0x84, 0xa4, 'k', 'i', 'n', 'd', 0x01, 0xa2, 'i', 'd', 0x01, 0xa2, 'o', 'p', 0xa1, 'x', 0xa4, 'b', 'o', 'd', 'y', 0xdd, 0xff, 0xff, 0xff, 0xff},
		{0x83, 0xa4, 'k', 'i', 'n', 'd', 0x02, 0xa2, 'i', 'd', 0x01, 0xa4, 'b', 'o', 'd', 'y', 0xd6, 0xff, 0, 0, 0, 1}, // a timestamp ext
		{0x83, 0xa4, 'k', 'i', 'n', 'd', 0x02, 0xa2, 'i', 'd', 0x01, 0xa4, 'b', 'o', 'd', 'y', 0xd4, 0x05, 0x00},       // an unknown ext
	} {
		f.Add(junk)
	}
	for _, frame := range hostileFrames(f) {
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := DecodeEnvelope(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("an error that is not ErrMalformed: %v", err)
			}
			return
		}
		// What a refused frame is answered with agrees with the decoder
		// on the frames it accepts.
		if kind, id := scanHead(data); kind != env.Kind || id != env.ID {
			t.Fatalf("scanHead read kind %d id %d; the decoder kind %d id %d", kind, id, env.Kind, env.ID)
		}
		// The agent and the clients decode bodies into the op's struct:
		// that path (typed slices, nested messages) must not fail badly
		// either.
		for _, newMsg := range fuzzMessages(env) {
			if err := DecodeBody(env.Body, newMsg()); err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("an error that is not ErrMalformed: %v", err)
			}
		}
		first, ok := reencodeGeneric(t, env)
		if !ok {
			return
		}
		env2, err := DecodeEnvelope(first[4:])
		if err != nil {
			t.Fatalf("the Encoder wrote a frame DecodeEnvelope refuses: %v\n%x", err, first)
		}
		// A response's op is read but not written (responses have none);
		// a push's id is always written 0.
		if env2.Kind != env.Kind || (env.Kind != KindResponse && env2.Op != env.Op) || (env.Kind != KindPush && env2.ID != env.ID) {
			t.Fatalf("the envelope changed: %+v then %+v", env, env2)
		}
		second, ok := reencodeGeneric(t, env2)
		if !ok {
			t.Fatalf("a re-encoded body no longer decodes:\n%x", first)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("encoding is not a fixed point:\n%x\n%x", first, second)
		}
	})
}

// hostileFrames are frame bodies of the classes of bad input a client can
// send (issue 10): ids at the edges (0, the largest), kinds a client must
// not send (a response, a push), a body cut off after a valid id, and
// absurd hello fields (negative counts, NaN and infinite periods, a name
// with a NUL, a very long name, many queues), so that the fuzzer starts
// from each.
func hostileFrames(f *testing.F) [][]byte {
	enc := NewEncoder()
	frame := func(b []byte, err error) []byte {
		require.NoError(f, err)
		return append([]byte(nil), b[4:]...)
	}
	neg, nan, inf := -1, math.NaN(), math.Inf(1)
	many := make([]QueueRegistration, 200)
	for i := range many {
		many[i] = QueueRegistration{Name: "q" + strconv.Itoa(i), WorkerConcurrency: &neg}
	}
	hellos := []Hello{
		{MinVersion: 1, MaxVersion: 1, Role: RoleWorker, AppName: "a\x00b", MaxConcurrency: -5},
		{MinVersion: 1, MaxVersion: 1, Role: RoleWorker, AppName: strings.Repeat("n", 4096),
			Queues: []QueueRegistration{{Name: "q", Concurrency: &neg, RateLimitMax: &neg, RateLimitPeriodSec: &nan, PollingIntervalSec: inf}}},
		{MinVersion: 1, MaxVersion: 1, Role: RoleWorker, AppName: "many", Queues: many},
		{MinVersion: 7, MaxVersion: 0, Role: "impostor"},
	}
	out := [][]byte{
		frame(enc.Request(0, OpPing, Empty{})),
		frame(enc.Request(math.MaxUint64, OpPing, Empty{})),
		frame(enc.Response(3, Empty{})),
		frame(enc.Push(PushRun, &Run{WorkflowID: "w", History: []Step{{FunctionID: -1}}})),
		frame(enc.ErrorResponse(9, &Error{Code: 65535, Name: "no_such_code"})),
		frame(enc.Request(5, OpRecordStep, &RecordStep{WorkflowID: "w", Step: Step{FunctionID: math.MinInt32}})),
	}
	for _, h := range hellos {
		out = append(out, frame(enc.Request(1, OpHello, &h)))
	}
	for _, b := range append([][]byte(nil), out...) {
		out = append(out, b[:len(b)*2/3]) // cut off inside the body, after the id
	}
	return out
}

// requestMessages is the body message of each request and push op.
var requestMessages = map[string]string{
	OpHello: "Hello", OpPing: "Empty", OpStartWorkflow: "StartWorkflow", OpRecordStep: "RecordStep",
	OpFinish: "Finish", OpGetResult: "GetResult", OpGetWorkflow: "GetWorkflow", OpListWorkflows: "ListWorkflows",
	OpListSteps: "WorkflowRef", OpCancel: "WorkflowRef", OpResume: "ResumeWorkflow",
	PushRun: "Run", PushCancel: "CancelPush",
}

// fuzzMessages returns the messages a body may be decoded into: the op's
// for a request or push, every reply for a response.
func fuzzMessages(env Envelope) []func() any {
	if env.Kind != KindResponse {
		if name, ok := requestMessages[env.Op]; ok {
			return []func() any{messageTypes[name]}
		}
		return nil
	}
	var out []func() any
	for _, name := range []string{"HelloReply", "StartWorkflowReply", "FinishReply", "WorkflowResult",
		"WorkflowInfo", "ListWorkflowsReply", "ListStepsReply"} {
		out = append(out, messageTypes[name])
	}
	return out
}

// reencodeGeneric encodes env again with its body read as a generic map;
// false when the body is not one.
func reencodeGeneric(t *testing.T, env Envelope) ([]byte, bool) {
	enc := NewEncoder()
	var frame []byte
	var err error
	if env.Error != nil {
		frame, err = enc.ErrorResponse(env.ID, env.Error)
	} else {
		var body map[string]any
		if DecodeBody(env.Body, &body) != nil {
			return nil, false
		}
		switch env.Kind {
		case KindRequest:
			frame, err = enc.Request(env.ID, env.Op, body)
		case KindResponse:
			frame, err = enc.Response(env.ID, body)
		default:
			frame, err = enc.Push(env.Op, body)
		}
	}
	if err != nil {
		t.Fatalf("a decoded envelope does not encode: %v (%+v)", err, env)
	}
	return append([]byte(nil), frame...), true
}

// FuzzFrameReader feeds arbitrary byte streams, in arbitrary pieces, to a
// FrameReader with a small cap, and checks each result against a direct
// reading of the stream.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte{0x10}, []byte{})
	f.Add([]byte{0x10}, AppendFrame(nil, []byte("hello")))
	f.Add([]byte{0x41}, append(AppendFrame(nil, []byte("hello")), AppendFrame(nil, nil)...))
	f.Add([]byte{0x82}, append(AppendFrame(nil, bytes.Repeat([]byte("x"), 40)), 0, 0))
	f.Add([]byte{0x05}, AppendFrame(nil, []byte("too long for five")))
	f.Add([]byte{0xff}, []byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x04}, AppendFrame(nil, []byte("exact")))                          // a frame exactly at the cap
	f.Add([]byte{0x44}, append(AppendFrame(nil, []byte("exact")), 0, 0, 0, 6, 'x')) // then one over it, cut short
	f.Add([]byte{0x80}, append(AppendFrame(nil, nil), 0, 0))                        // an empty frame, then half a header
	f.Fuzz(func(t *testing.T, params, stream []byte) {
		var p byte
		if len(params) > 0 {
			p = params[0]
		}
		limit := int(p&0x3f) + 1 // 1..64
		var r io.Reader = bytes.NewReader(stream)
		switch p >> 6 {
		case 1:
			r = iotest.OneByteReader(r)
		case 2:
			r = iotest.HalfReader(r)
		case 3:
			r = iotest.DataErrReader(r)
		}
		fr := NewFrameReader(r, limit)
		fr.chunk = 4 // exercise growth even with small frames
		pos := 0
		for {
			got, err := fr.Next()
			rest := stream[pos:]
			switch {
			case len(rest) == 0:
				if err != io.EOF {
					t.Fatalf("at the end: %v, want io.EOF", err)
				}
				return
			case len(rest) < 4:
				if err != io.ErrUnexpectedEOF {
					t.Fatalf("inside a header: %v, want io.ErrUnexpectedEOF", err)
				}
				return
			}
			n := binary.BigEndian.Uint32(rest)
			switch {
			case uint64(n) > uint64(limit):
				if !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("a %d-byte frame over a %d cap: %v", n, limit, err)
				}
				return
			case uint64(len(rest)-4) < uint64(n):
				if err != io.ErrUnexpectedEOF {
					t.Fatalf("inside a body: %v, want io.ErrUnexpectedEOF", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("a whole frame: %v", err)
			}
			if !bytes.Equal(got, rest[4:4+n]) {
				t.Fatalf("frame at %d: %x, want %x", pos, got, rest[4:4+n])
			}
			if cap(fr.buf) > maxRetainedBuffer {
				t.Fatalf("the reader kept a %d-byte buffer", cap(fr.buf))
			}
			pos += 4 + int(n)
		}
	})
}
