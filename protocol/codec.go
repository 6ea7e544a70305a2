package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Envelope is a decoded frame. Body holds the op's message, still encoded:
// DecodeBody turns it into the op's struct once the op is known.
type Envelope struct {
	Kind  Kind
	ID    uint64
	Op    string
	Body  []byte // raw msgpack, nil when absent
	Error *Error
}

// maxEnvelopeFields bounds the envelope map: five are defined, the rest is
// room for fields a newer peer may add.
const maxEnvelopeFields = 16

// Encoder builds frames into a reused buffer. Not safe for concurrent use;
// give each writer its own.
type Encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

// NewEncoder returns an Encoder.
func NewEncoder() *Encoder {
	e := &Encoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	// Struct fields are written as maps keyed by name so that any msgpack
	// library can read them; compact ints keep the frames small; sorted
	// map keys (Error.Data) make a frame's bytes a function of its content,
	// which the golden vectors rely on.
	e.enc.UseCompactInts(true)
	e.enc.SetSortMapKeys(true)
	return e
}

// Request encodes a request frame (with its length prefix). The returned
// slice is valid until the Encoder's next call.
func (e *Encoder) Request(id uint64, op string, body any) ([]byte, error) {
	return e.frame(KindRequest, id, op, body, nil)
}

// Response encodes a successful response frame.
func (e *Encoder) Response(id uint64, body any) ([]byte, error) {
	return e.frame(KindResponse, id, "", body, nil)
}

// ErrorResponse encodes an error response frame. An empty perr.Name is set
// from the catalog.
func (e *Encoder) ErrorResponse(id uint64, perr *Error) ([]byte, error) {
	return e.frame(KindResponse, id, "", nil, perr)
}

// Push encodes a push frame.
func (e *Encoder) Push(op string, body any) ([]byte, error) {
	return e.frame(KindPush, 0, op, body, nil)
}

func (e *Encoder) frame(kind Kind, id uint64, op string, body any, perr *Error) ([]byte, error) {
	e.buf.Reset()
	e.buf.Write([]byte{0, 0, 0, 0}) // length, filled in below
	fields := 2
	if op != "" {
		fields++
	}
	if body != nil {
		fields++
	}
	if perr != nil {
		fields++
	}
	enc := e.enc
	if err := enc.EncodeMapLen(fields); err != nil {
		return nil, err
	}
	_ = enc.EncodeString("kind")
	_ = enc.EncodeUint(uint64(kind))
	_ = enc.EncodeString("id")
	_ = enc.EncodeUint(id)
	if op != "" {
		_ = enc.EncodeString("op")
		_ = enc.EncodeString(op)
	}
	if body != nil {
		_ = enc.EncodeString("body")
		if err := enc.Encode(body); err != nil {
			return nil, fmt.Errorf("encode %s body: %w", op, err)
		}
	}
	if perr != nil {
		if perr.Name == "" {
			perr.Name = perr.Code.String()
		}
		_ = enc.EncodeString("error")
		if err := enc.Encode(perr); err != nil {
			return nil, fmt.Errorf("encode error: %w", err)
		}
	}
	out := e.buf.Bytes()
	n := len(out) - frameHeaderSize
	out[0], out[1], out[2], out[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return out, nil
}

// ErrMalformed wraps every decoding failure of an envelope or body.
var ErrMalformed = errors.New("malformed message")

// DecodeEnvelope decodes a frame body (without its length prefix). The
// returned Body aliases frame.
//
// On error the Envelope holds the kind and id the frame announces, when
// they can be read (the fault lies elsewhere in the frame): a request's
// non-zero ID lets the caller answer it, so that it fails at once instead
// of at its caller's timeout.
func DecodeEnvelope(frame []byte) (Envelope, error) {
	env, err := decodeEnvelope(frame)
	if err != nil {
		env = Envelope{}
		env.Kind, env.ID = scanHead(frame)
	}
	return env, err
}

// scanHead reads the kind and id of a frame that does not decode: it walks
// the envelope's entries as far as they are well-formed msgpack, and keeps
// the last kind and id it meets that are non-negative integers (0 for
// those it does not meet).
func scanHead(frame []byte) (kind Kind, id uint64) {
	d := getDecoder(frame)
	defer putDecoder(d)
	dec, r := d.dec, &d.r
	n, err := dec.DecodeMapLen()
	if err != nil || n < 0 || n > maxEnvelopeFields {
		return 0, 0
	}
	for i := 0; i < n; i++ {
		// Each key and value is walked (bounds-checked, allocation-free)
		// before the decoder reads it, and a value is skipped by moving
		// the reader past it: the decoder reads the bytes.Reader directly,
		// buffering nothing. Unwalked, a key whose header claims gigabytes
		// made the decoder grow its reused buffer by a quarter of its size
		// on every such frame, without bound.
		if _, err := skipValue(frame, len(frame)-r.Len(), 2); err != nil {
			return kind, id
		}
		key, err := dec.DecodeString()
		if err != nil {
			return kind, id
		}
		end, err := skipValue(frame, len(frame)-r.Len(), 2)
		if err != nil {
			return kind, id
		}
		if key == "kind" || key == "id" {
			if v, err := decodeUint(dec); err == nil {
				if key == "id" {
					id = v
				} else if v >= uint64(KindRequest) && v <= uint64(KindPush) {
					kind = Kind(v)
				}
			}
		}
		if _, err := r.Seek(int64(end), io.SeekStart); err != nil {
			return kind, id
		}
	}
	return kind, id
}

func decodeEnvelope(frame []byte) (Envelope, error) {
	var env Envelope
	if err := checkWellFormed(frame); err != nil {
		return env, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	d := getDecoder(frame)
	defer putDecoder(d)
	dec, r := d.dec, &d.r
	n, err := dec.DecodeMapLen()
	if err != nil {
		return env, fmt.Errorf("%w: envelope is not a map: %v", ErrMalformed, err)
	}
	if n < 0 || n > maxEnvelopeFields {
		return env, fmt.Errorf("%w: envelope has %d fields", ErrMalformed, n)
	}
	var haveKind, haveID bool
	for i := 0; i < n; i++ {
		key, err := dec.DecodeString()
		if err != nil {
			return env, fmt.Errorf("%w: envelope key: %v", ErrMalformed, err)
		}
		switch key {
		case "kind":
			k, err := decodeUint(dec)
			if err != nil {
				return env, fmt.Errorf("%w: kind: %v", ErrMalformed, err)
			}
			if k < uint64(KindRequest) || k > uint64(KindPush) {
				return env, fmt.Errorf("%w: unknown kind %d", ErrMalformed, k)
			}
			env.Kind, haveKind = Kind(k), true
		case "id":
			if env.ID, err = decodeUint(dec); err != nil {
				return env, fmt.Errorf("%w: id: %v", ErrMalformed, err)
			}
			haveID = true
		case "op":
			if env.Op, err = dec.DecodeString(); err != nil {
				return env, fmt.Errorf("%w: op: %v", ErrMalformed, err)
			}
		case "body":
			// Skip the value and slice it out of frame: no copy.
			start := len(frame) - r.Len()
			if err := dec.Skip(); err != nil {
				return env, fmt.Errorf("%w: body: %v", ErrMalformed, err)
			}
			env.Body = frame[start : len(frame)-r.Len() : len(frame)-r.Len()]
		case "error":
			// nil is no error: some encoders write absent fields as nil.
			if c, err := dec.PeekCode(); err == nil && c == msgpcode.Nil {
				_ = dec.Skip()
				env.Error = nil
				continue
			}
			var perr Error
			if err := dec.Decode(&perr); err != nil {
				return env, fmt.Errorf("%w: error: %v", ErrMalformed, err)
			}
			env.Error = &perr
		default:
			// Unknown envelope fields are skipped: a newer peer may add some.
			if err := dec.Skip(); err != nil {
				return env, fmt.Errorf("%w: field %q: %v", ErrMalformed, key, err)
			}
		}
	}
	if r.Len() > 0 {
		return env, fmt.Errorf("%w: %d trailing bytes after the envelope", ErrMalformed, r.Len())
	}
	if !haveKind || !haveID {
		return env, fmt.Errorf("%w: envelope needs kind and id", ErrMalformed)
	}
	if env.Kind == KindRequest && env.ID == 0 {
		return env, fmt.Errorf("%w: a request needs an id from 1 (0 is reserved for errors about the connection)", ErrMalformed)
	}
	if env.Kind != KindResponse && env.Op == "" {
		return env, fmt.Errorf("%w: a request or push needs an op", ErrMalformed)
	}
	return env, nil
}

// decoderState is a msgpack decoder reading a byte slice, pooled.
// bytes.Reader is an io.ByteScanner, so the decoder reads it directly,
// without buffering ahead: r.Len() is exactly what is left.
type decoderState struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

var decoders = sync.Pool{New: func() any {
	d := &decoderState{}
	d.dec = msgpack.NewDecoder(&d.r)
	return d
}}

func getDecoder(b []byte) *decoderState {
	d := decoders.Get().(*decoderState)
	d.r.Reset(b)
	d.dec.Reset(&d.r) // clears the decoder's state and options
	return d
}

func putDecoder(d *decoderState) {
	d.r.Reset(nil) // do not keep the frame alive
	decoders.Put(d)
}

// decodeUint decodes a non-negative integer of any msgpack int type, or a
// float that holds one (a JavaScript encoder's number: section 5 of
// PROTOCOL.md). The msgpack library's own DecodeUint64 reads nil as 0 and
// wraps negative numbers around, which would turn id -1 into 2^64-1.
func decodeUint(dec *msgpack.Decoder) (uint64, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return 0, err
	}
	switch {
	case c == msgpcode.Float || c == msgpcode.Double:
		f, err := dec.DecodeFloat64()
		if err != nil {
			return 0, err
		}
		return integralFloat(f, reflect.Uint64)
	case msgpcode.IsFixedNum(c) && int8(c) >= 0,
		c == msgpcode.Uint8, c == msgpcode.Uint16, c == msgpcode.Uint32, c == msgpcode.Uint64:
		return dec.DecodeUint64()
	case msgpcode.IsFixedNum(c),
		c == msgpcode.Int8, c == msgpcode.Int16, c == msgpcode.Int32, c == msgpcode.Int64:
		n, err := dec.DecodeInt64()
		if err != nil {
			return 0, err
		}
		if n < 0 {
			return 0, fmt.Errorf("%d is negative", n)
		}
		return uint64(n), nil
	}
	return 0, fmt.Errorf("not an integer (msgpack type byte 0x%02x)", c)
}

// DecodeBody decodes an envelope's body into v. A missing body decodes as
// an empty message. Unknown fields are ignored (a newer peer may send
// more); a field of the wrong type is an error, and so are bytes after the
// body's value. An integer field also reads a float that holds an integer
// of its range (JavaScript encoders write numbers as floats); any other
// float there is an error that wraps a *FieldError naming the field.
func DecodeBody(body []byte, v any) error {
	if len(body) == 0 {
		return nil
	}
	hasFloat, err := checkBody(body)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if hasFloat {
		if body, err = coerceIntegralFloats(body, reflect.TypeOf(v)); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
	}
	// Not msgpack.Unmarshal: it turns on value preallocation, which starts
	// a background goroutine per decoded pointer type.
	d := getDecoder(body)
	defer putDecoder(d)
	if err := d.dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// NegotiateVersion picks the highest version in both ranges, or reports
// none in common. A clientMax of 0 means clientMin alone.
func NegotiateVersion(clientMin, clientMax uint32) (uint32, bool) {
	return negotiate(clientMin, clientMax, MinVersion, Version)
}

func negotiate(clientMin, clientMax, agentMin, agentMax uint32) (uint32, bool) {
	if clientMax == 0 {
		clientMax = clientMin
	}
	hi := min(clientMax, agentMax)
	if hi < agentMin || hi < clientMin {
		return 0, false
	}
	return hi, true
}
