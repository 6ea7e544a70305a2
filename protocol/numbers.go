package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Integral floats for integer fields. Some JavaScript msgpack encoders
// write numbers as float64 (every number, with @msgpack/msgpack's
// forceIntegerToFloat; others those past 32 bits), because a JavaScript
// number is a float64. The agent reads such a float in an integer field as
// the integer it holds, when it holds one within the field's range, and
// refuses it otherwise, naming the field. This is the one place that does
// it: DecodeBody rewrites each such float as a msgpack integer before the
// msgpack library decodes the body (the library refuses a float for an
// integer), so every message, its nested messages and lists included, gets
// the same rule.

// coerceIntegralFloats returns body with every float that stands for an
// integer field of t rewritten as a msgpack integer, or a *FieldError for
// one that holds no integer of the field's range. Path names the field
// from the message down (caller.function_id); it does not name the op.
func coerceIntegralFloats(body []byte, t reflect.Type) ([]byte, error) {
	c := coercer{src: body}
	if _, err := c.value(0, t, ""); err != nil {
		return nil, err
	}
	if c.out == nil {
		return body, nil
	}
	return append(c.out, body[c.copied:]...), nil
}

// coercer walks a well-formed msgpack value beside the Go type it decodes
// into. out, once a float has been rewritten, holds the rewritten bytes up
// to src[copied:].
type coercer struct {
	src    []byte
	out    []byte
	copied int
}

// value walks the value at src[i] for a Go value of type t and returns the
// offset after it. The body is well-formed (checkWellFormed ran first), so
// lengths fit; where the value's msgpack type does not fit t the walk
// skips it and leaves the error to the decoder.
func (c *coercer) value(i int, t reflect.Type, path string) (int, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	b := c.src
	code := b[i]
	if code == 0xc0 { // nil
		return i + 1, nil
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var f float64
		switch code {
		case 0xca:
			f = float64(math.Float32frombits(binary.BigEndian.Uint32(b[i+1:])))
		case 0xcb:
			f = math.Float64frombits(binary.BigEndian.Uint64(b[i+1:]))
		default:
			return skipValue(b, i, 1)
		}
		n, err := integralFloat(f, t.Kind())
		if err != nil {
			return 0, &FieldError{Path: path, Problem: err.Error()}
		}
		end := i + 5
		if code == 0xcb {
			end = i + 9
		}
		c.out = append(c.out, b[c.copied:i]...)
		c.out = appendInt(c.out, n, f < 0)
		c.copied = end
		return end, nil
	case reflect.Struct:
		n, j, ok := containerHeader(b, i, true)
		if !ok {
			return skipValue(b, i, 1)
		}
		fields := structFields(t)
		for k := 0; k < n; k++ {
			key, ok := stringAt(b, j)
			end, err := skipValue(b, j, 1)
			if err != nil {
				return 0, err
			}
			j = end
			if ft, known := fields[key]; ok && known {
				if j, err = c.value(j, ft, joinPath(path, key)); err != nil {
					return 0, err
				}
				continue
			}
			if j, err = skipValue(b, j, 1); err != nil {
				return 0, err
			}
		}
		return j, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 { // []byte: a str or bin
			return skipValue(b, i, 1)
		}
		n, j, ok := containerHeader(b, i, false)
		if !ok {
			return skipValue(b, i, 1)
		}
		var err error
		for k := 0; k < n; k++ {
			if j, err = c.value(j, t.Elem(), path+"["+strconv.Itoa(k)+"]"); err != nil {
				return 0, err
			}
		}
		return j, nil
	case reflect.Map:
		n, j, ok := containerHeader(b, i, true)
		if !ok {
			return skipValue(b, i, 1)
		}
		var err error
		for k := 0; k < n; k++ {
			key, _ := stringAt(b, j)
			if j, err = skipValue(b, j, 1); err != nil {
				return 0, err
			}
			if j, err = c.value(j, t.Elem(), joinPath(path, key)); err != nil {
				return 0, err
			}
		}
		return j, nil
	}
	return skipValue(b, i, 1)
}

// integralFloat is f as an integer of kind k: refused when it is not an
// integer (a fraction, NaN, an infinity) or outside k's range. The bits of
// the result are the integer's (two's complement when negative).
func integralFloat(f float64, k reflect.Kind) (uint64, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
		return 0, fmt.Errorf("%v is not an integer", f)
	}
	var lo, hi float64 // hi is exclusive: 2^bits is exact as a float, 2^bits-1 is not
	switch k {
	case reflect.Int8:
		lo, hi = math.MinInt8, -math.MinInt8
	case reflect.Int16:
		lo, hi = math.MinInt16, -math.MinInt16
	case reflect.Int32:
		lo, hi = math.MinInt32, -math.MinInt32
	case reflect.Int, reflect.Int64:
		lo, hi = math.MinInt64, -math.MinInt64
	case reflect.Uint8:
		hi = 1 << 8
	case reflect.Uint16:
		hi = 1 << 16
	case reflect.Uint32:
		hi = 1 << 32
	default: // uint, uint64
		hi = 1 << 64
	}
	if f < lo || f >= hi {
		return 0, fmt.Errorf("%v is out of range (%s)", f, rangeText(k))
	}
	if f < 0 {
		return uint64(int64(f)), nil
	}
	return uint64(f), nil
}

func rangeText(k reflect.Kind) string {
	switch k {
	case reflect.Int8:
		return "-2^7 to 2^7-1"
	case reflect.Int16:
		return "-2^15 to 2^15-1"
	case reflect.Int32:
		return "-2^31 to 2^31-1"
	case reflect.Int, reflect.Int64:
		return "-2^63 to 2^63-1"
	case reflect.Uint8:
		return "0 to 2^8-1"
	case reflect.Uint16:
		return "0 to 2^16-1"
	case reflect.Uint32:
		return "0 to 2^32-1"
	}
	return "0 to 2^64-1"
}

// appendInt writes n as a msgpack int 64 (negative) or uint 64.
func appendInt(dst []byte, n uint64, negative bool) []byte {
	if negative {
		return binary.BigEndian.AppendUint64(append(dst, 0xd3), n)
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), n)
}

// containerHeader reads a map (isMap) or array header at b[i]: its number
// of entries and the offset of the first. ok is false for any other type.
func containerHeader(b []byte, i int, isMap bool) (n, next int, ok bool) {
	c := b[i]
	switch {
	case isMap && c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f), i + 1, true
	case !isMap && c >= 0x90 && c <= 0x9f:
		return int(c & 0x0f), i + 1, true
	case isMap && c == 0xde, !isMap && c == 0xdc:
		return int(binary.BigEndian.Uint16(b[i+1:])), i + 3, true
	case isMap && c == 0xdf, !isMap && c == 0xdd:
		return int(binary.BigEndian.Uint32(b[i+1:])), i + 5, true
	}
	return 0, i, false
}

// stringAt reads the str (or bin: the decoder reads both as a string) at
// b[i] without copying it.
func stringAt(b []byte, i int) (string, bool) {
	c := b[i]
	var n, start int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n, start = int(c&0x1f), i+1
	case c == 0xd9 || c == 0xc4:
		n, start = int(b[i+1]), i+2
	case c == 0xda || c == 0xc5:
		n, start = int(binary.BigEndian.Uint16(b[i+1:])), i+3
	case c == 0xdb || c == 0xc6:
		n, start = int(binary.BigEndian.Uint32(b[i+1:])), i+5
	default:
		return "", false
	}
	return string(b[start : start+n]), true
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// structFields maps a struct's msgpack field names to their types, as the
// msgpack library reads them: the tag's name, else the Go name; a field
// tagged "-" is not read; an embedded struct without a name is inlined.
var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

func structFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	addStructFields(m, t)
	fieldCache.Store(t, m)
	return m
}

func addStructFields(m map[string]reflect.Type, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("msgpack")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addStructFields(m, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := m[name]; !taken {
			m[name] = f.Type
		}
	}
}
