package protocol

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
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
	// library can read them; compact ints keep the frames small.
	e.enc.UseCompactInts(true)
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

// ErrorResponse encodes an error response frame.
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
func DecodeEnvelope(frame []byte) (Envelope, error) {
	var env Envelope
	r := bytes.NewReader(frame)
	// bytes.Reader is an io.ByteScanner, so the decoder reads it directly
	// and r.Len() is exactly what is left.
	dec := msgpack.NewDecoder(r)
	n, err := dec.DecodeMapLen()
	if err != nil {
		return env, fmt.Errorf("%w: envelope is not a map: %v", ErrMalformed, err)
	}
	if n < 0 || n > 16 {
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
			k, err := dec.DecodeUint8()
			if err != nil {
				return env, fmt.Errorf("%w: kind: %v", ErrMalformed, err)
			}
			env.Kind, haveKind = Kind(k), true
		case "id":
			if env.ID, err = dec.DecodeUint64(); err != nil {
				return env, fmt.Errorf("%w: id: %v", ErrMalformed, err)
			}
			haveID = true
		case "op":
			if env.Op, err = dec.DecodeString(); err != nil {
				return env, fmt.Errorf("%w: op: %v", ErrMalformed, err)
			}
		case "body":
			raw, err := dec.DecodeRaw()
			if err != nil {
				return env, fmt.Errorf("%w: body: %v", ErrMalformed, err)
			}
			env.Body = raw
		case "error":
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
	switch env.Kind {
	case KindRequest, KindPush:
		if env.Op == "" {
			return env, fmt.Errorf("%w: a request or push needs an op", ErrMalformed)
		}
	case KindResponse:
	default:
		return env, fmt.Errorf("%w: unknown kind %d", ErrMalformed, env.Kind)
	}
	return env, nil
}

// DecodeBody decodes an envelope's body into v. A missing body decodes as
// an empty message. Unknown fields are ignored (a newer peer may send
// more); a field of the wrong type is an error.
func DecodeBody(body []byte, v any) error {
	if len(body) == 0 {
		return nil
	}
	if err := msgpack.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// NegotiateVersion picks the highest version in both ranges, or reports
// none in common.
func NegotiateVersion(clientMin, clientMax uint32) (uint32, bool) {
	if clientMax == 0 {
		clientMax = clientMin
	}
	hi := min(clientMax, Version)
	if hi < MinVersion || hi < clientMin {
		return 0, false
	}
	return hi, true
}
