package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// This file is a small, language-neutral model of the values frames carry,
// independent of the package's encoder and of msgpack struct tags: ordered
// maps (omap), []any, string, int64/uint64, float64, bool and nil. The
// golden test uses it to show that a vector's JSON and its bytes say the
// same thing, the way a binding in another language would check it.

type kv struct {
	k string
	v any
}

// omap is a map with its keys in wire order.
type omap []kv

func (m omap) get(k string) any {
	for _, e := range m {
		if e.k == k {
			return e.v
		}
	}
	return nil
}

// wideInt is an integer written with a given msgpack type byte (0xcc..0xd3)
// instead of the smallest encoding, to build decode-only vectors.
type wideInt struct {
	code byte
	n    int64
}

// readValue decodes one msgpack value (exactly, no trailing bytes) into the
// model.
func readValue(b []byte) (any, error) {
	r := bytes.NewReader(b)
	dec := msgpack.NewDecoder(r)
	v, err := readAny(dec, 0)
	if err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", r.Len())
	}
	return v, nil
}

func readAny(dec *msgpack.Decoder, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, errors.New("too deep")
	}
	c, err := dec.PeekCode()
	if err != nil {
		return nil, err
	}
	switch {
	case c == msgpcode.Nil:
		return nil, dec.DecodeNil()
	case c == msgpcode.True || c == msgpcode.False:
		return dec.DecodeBool()
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := dec.DecodeMapLen()
		if err != nil {
			return nil, err
		}
		m := make(omap, 0, n)
		for i := 0; i < n; i++ {
			k, err := dec.DecodeString()
			if err != nil {
				return nil, err
			}
			v, err := readAny(dec, depth+1)
			if err != nil {
				return nil, err
			}
			m = append(m, kv{k, v})
		}
		return m, nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := dec.DecodeArrayLen()
		if err != nil {
			return nil, err
		}
		a := make([]any, 0, n)
		for i := 0; i < n; i++ {
			v, err := readAny(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, nil
	case msgpcode.IsString(c):
		return dec.DecodeString()
	case c == msgpcode.Float || c == msgpcode.Double:
		return dec.DecodeFloat64()
	case c == msgpcode.Uint64:
		n, err := dec.DecodeUint64()
		if err == nil && n <= math.MaxInt64 {
			return int64(n), nil
		}
		return n, err
	case msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64):
		return dec.DecodeInt64()
	}
	return nil, fmt.Errorf("msgpack type byte 0x%02x is not used by the protocol", c)
}

// parseJSON reads JSON into the model, keeping object keys in order.
func parseJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseJSONValue(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing JSON")
	}
	return v, nil
}

func parseJSONValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := omap{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := parseJSONValue(dec)
				if err != nil {
					return nil, err
				}
				m = append(m, kv{kt.(string), v})
			}
			_, err := dec.Token()
			return m, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseJSONValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		if n, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return n, nil
		}
		if n, err := strconv.ParseUint(string(t), 10, 64); err == nil {
			return n, nil
		}
		return strconv.ParseFloat(string(t), 64)
	default: // string, bool, nil
		return t, nil
	}
}

// renderJSON writes the model as compact JSON, object keys in order and
// floats with a decimal point (so that 2.0 stays a float).
func renderJSON(v any) json.RawMessage {
	var buf bytes.Buffer
	writeJSON(&buf, v)
	return buf.Bytes()
}

func writeJSON(buf *bytes.Buffer, v any) {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(t))
	case int64:
		buf.WriteString(strconv.FormatInt(t, 10))
	case uint64:
		buf.WriteString(strconv.FormatUint(t, 10))
	case float64:
		s := strconv.FormatFloat(t, 'g', -1, 64)
		if !bytes.ContainsAny([]byte(s), ".eEn") {
			s += ".0"
		}
		buf.WriteString(s)
	case string:
		var sb bytes.Buffer
		enc := json.NewEncoder(&sb)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(t)
		buf.Write(bytes.TrimRight(sb.Bytes(), "\n"))
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSON(buf, e)
		}
		buf.WriteByte(']')
	case omap:
		buf.WriteByte('{')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSON(buf, e.k)
			buf.WriteByte(':')
			writeJSON(buf, e.v)
		}
		buf.WriteByte('}')
	default:
		panic(fmt.Sprintf("writeJSON: %T", v))
	}
}

// appendValue encodes the model as msgpack the canonical way: maps in
// order, the smallest integer encoding, floats as float64, strings as str.
func appendValue(dst []byte, v any) []byte {
	switch t := v.(type) {
	case nil:
		return append(dst, 0xc0)
	case bool:
		if t {
			return append(dst, 0xc3)
		}
		return append(dst, 0xc2)
	case int64:
		if t >= 0 {
			return appendUint(dst, uint64(t))
		}
		switch {
		case t >= -32:
			return append(dst, byte(t))
		case t >= math.MinInt8:
			return append(dst, 0xd0, byte(t))
		case t >= math.MinInt16:
			return binary.BigEndian.AppendUint16(append(dst, 0xd1), uint16(t))
		case t >= math.MinInt32:
			return binary.BigEndian.AppendUint32(append(dst, 0xd2), uint32(t))
		}
		return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(t))
	case uint64:
		return appendUint(dst, t)
	case wideInt:
		dst = append(dst, t.code)
		switch t.code {
		case 0xcc, 0xd0:
			return append(dst, byte(t.n))
		case 0xcd, 0xd1:
			return binary.BigEndian.AppendUint16(dst, uint16(t.n))
		case 0xce, 0xd2:
			return binary.BigEndian.AppendUint32(dst, uint32(t.n))
		}
		return binary.BigEndian.AppendUint64(dst, uint64(t.n))
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(t))
	case string:
		n := len(t)
		switch {
		case n < 32:
			dst = append(dst, 0xa0|byte(n))
		case n < 1<<8:
			dst = append(dst, 0xd9, byte(n))
		case n < 1<<16:
			dst = binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
		default:
			dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
		}
		return append(dst, t...)
	case []any:
		dst = appendContainer(dst, len(t), 0x90, 0xdc)
		for _, e := range t {
			dst = appendValue(dst, e)
		}
		return dst
	case omap:
		dst = appendContainer(dst, len(t), 0x80, 0xde)
		for _, e := range t {
			dst = appendValue(dst, e.k)
			dst = appendValue(dst, e.v)
		}
		return dst
	}
	panic(fmt.Sprintf("appendValue: %T", v))
}

func appendUint(dst []byte, n uint64) []byte {
	switch {
	case n < 128:
		return append(dst, byte(n))
	case n <= math.MaxUint8:
		return append(dst, 0xcc, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), n)
}

// appendContainer writes an array (fix 0x90, 0xdc) or map (fix 0x80, 0xde)
// header.
func appendContainer(dst []byte, n int, fix, c16 byte) []byte {
	switch {
	case n < 16:
		return append(dst, fix|byte(n))
	case n < 1<<16:
		return binary.BigEndian.AppendUint16(append(dst, c16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, c16+1), uint32(n))
}
