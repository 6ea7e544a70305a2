package protocol

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// intField is an integer field somewhere in a message: its path (as a
// FieldError names it), how to build a body that sets it, and how to read
// it back from the decoded message.
type intField struct {
	path string
	kind reflect.Kind
	// body wraps a value into a body that puts it at the field.
	body func(v any) omap
	// get reads the field from a decoded message.
	get func(m reflect.Value) reflect.Value
}

// intFields lists every integer field of t, nested messages and lists of
// messages included, as the msgpack library reads them.
func intFields(t reflect.Type, depth int) []intField {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []intField
	if depth > 4 {
		return out
	}
	fields := structFields(t)
	for name, ft := range fields {
		name, ft := name, ft
		get := func(m reflect.Value) reflect.Value { return fieldByMsgpackName(m, name) }
		et := ft
		for et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		switch et.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out = append(out, intField{path: name, kind: et.Kind(),
				body: func(v any) omap { return omap{{name, v}} }, get: get})
		case reflect.Struct:
			for _, inner := range intFields(et, depth+1) {
				inner := inner
				out = append(out, intField{path: name + "." + inner.path, kind: inner.kind,
					body: func(v any) omap { return omap{{name, inner.body(v)}} },
					get:  func(m reflect.Value) reflect.Value { return inner.get(get(m)) }})
			}
		case reflect.Slice:
			el := et.Elem()
			for el.Kind() == reflect.Pointer {
				el = el.Elem()
			}
			if el.Kind() != reflect.Struct {
				continue
			}
			for _, inner := range intFields(el, depth+1) {
				inner := inner
				out = append(out, intField{path: name + "[1]." + inner.path, kind: inner.kind,
					body: func(v any) omap { return omap{{name, []any{omap{}, inner.body(v)}}} },
					get:  func(m reflect.Value) reflect.Value { return inner.get(get(m).Index(1)) }})
			}
		}
	}
	return out
}

// fieldByMsgpackName finds the field the msgpack library reads under name,
// through pointers and embedded structs.
func fieldByMsgpackName(v reflect.Value, name string) reflect.Value {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if f.Anonymous && tag == "" {
			if found := fieldByMsgpackName(v.Field(i), name); found.IsValid() {
				return found
			}
			continue
		}
		if tag == name {
			fv := v.Field(i)
			for fv.Kind() == reflect.Pointer {
				fv = fv.Elem()
			}
			return fv
		}
	}
	return reflect.Value{}
}

// requestMessageTypes are the message types requests carry, from the vectors.
func requestMessageTypes(t *testing.T) map[string]reflect.Type {
	t.Helper()
	out := map[string]reflect.Type{}
	for _, d := range vectorDefs() {
		if d.kind == KindRequest && d.message != "" {
			out[d.message] = reflect.TypeOf(messageTypes[d.message]())
		}
	}
	require.Contains(t, out, "StartWorkflow")
	require.Contains(t, out, "RecordStep")
	return out
}

// TestIntegralFloatsForEveryIntegerField: every integer field of every
// request message reads a float64 (and a float32) holding an integer as that
// integer, and refuses a fraction, NaN, an infinity and a value past its
// range, naming the field by its path.
func TestIntegralFloatsForEveryIntegerField(t *testing.T) {
	t.Parallel()
	fieldsSeen := 0
	for name, typ := range requestMessageTypes(t) {
		for _, f := range intFields(typ, 0) {
			fieldsSeen++
			t.Run(name+"."+f.path, func(t *testing.T) {
				t.Parallel()
				decode := func(body []byte) (reflect.Value, error) {
					m := reflect.New(typ.Elem())
					return m, DecodeBody(body, m.Interface())
				}
				asInt := func(v reflect.Value) float64 {
					if v.CanInt() {
						return float64(v.Int())
					}
					return float64(v.Uint())
				}
				m, err := decode(appendValue(nil, f.body(7.0)))
				require.NoError(t, err)
				require.Equal(t, 7.0, asInt(f.get(m)))
				// A float32 too.
				m, err = decode(appendFloat32Body(f.body, 9))
				require.NoError(t, err)
				require.Equal(t, 9.0, asInt(f.get(m)))

				unsigned := f.kind >= reflect.Uint && f.kind <= reflect.Uint64
				refused := []float64{1.5, math.NaN(), math.Inf(1), math.Inf(-1), 0x1p64}
				if unsigned {
					refused = append(refused, -1)
				} else {
					refused = append(refused, 0x1p63, -0x1p63*2)
					m, err = decode(appendValue(nil, f.body(-3.0)))
					require.NoError(t, err)
					require.Equal(t, -3.0, asInt(f.get(m)))
				}
				if f.kind == reflect.Uint32 {
					refused = append(refused, 0x1p32)
				}
				for _, bad := range refused {
					_, err := decode(appendValue(nil, f.body(bad)))
					require.ErrorIs(t, err, ErrMalformed, "%v", bad)
					var fe *FieldError
					require.True(t, errors.As(err, &fe), "%v: %v", bad, err)
					require.Equal(t, f.path, fe.Path)
				}
			})
		}
	}
	require.Greater(t, fieldsSeen, 50, "the walk finds the integer fields")
}

// appendFloat32Body builds body(v) with v a float32: appendValue writes
// every float as a float64, so the field's value is put in by hand.
func appendFloat32Body(body func(any) omap, v float32) []byte {
	const marker = 1234.5 // a float64 no field holds
	enc := appendValue(nil, body(marker))
	want := binary.BigEndian.AppendUint64([]byte{0xcb}, math.Float64bits(marker))
	i := strings.Index(string(enc), string(want))
	f32 := binary.BigEndian.AppendUint32([]byte{0xca}, math.Float32bits(v))
	return append(append(append([]byte(nil), enc[:i]...), f32...), enc[i+len(want):]...)
}

func TestIntegralFloatsExamples(t *testing.T) {
	t.Parallel()
	t.Run("epoch milliseconds and a negative zero", func(t *testing.T) {
		t.Parallel()
		var m StartWorkflow
		require.NoError(t, DecodeBody(appendValue(nil, omap{{"name", "n"},
			{"timeout_ms", 60000.0}, {"deadline_epoch_ms", 1767225600000.0}, {"priority", math.Copysign(0, -1)}}), &m))
		require.Equal(t, StartWorkflow{Name: "n", TimeoutMS: 60000, DeadlineEpochMS: 1767225600000}, m)
	})
	t.Run("the widest values", func(t *testing.T) {
		t.Parallel()
		var m StartWorkflow
		require.NoError(t, DecodeBody(appendValue(nil, omap{{"delay_ms", -0x1p63}}), &m))
		require.Equal(t, int64(math.MinInt64), m.DelayMS)
		var c CancelRequest
		require.NoError(t, DecodeBody(appendValue(nil, omap{{"request_id", 0x1p64 - 2048}}), &c))
		require.Equal(t, uint64(math.MaxUint64-2047), c.RequestID)
		var h Hello
		require.NoError(t, DecodeBody(appendValue(nil, omap{{"min_version", 4294967295.0}}), &h))
		require.Equal(t, uint32(math.MaxUint32), h.MinVersion)
	})
	t.Run("the message names the field", func(t *testing.T) {
		t.Parallel()
		var h Hello
		err := DecodeBody(appendValue(nil, omap{{"queues", []any{omap{{"name", "a"}}, omap{{"name", "b"}, {"concurrency", 2.5}}}}}), &h)
		var fe *FieldError
		require.True(t, errors.As(err, &fe))
		require.Equal(t, "queues[1].concurrency", fe.Path)
		require.Equal(t, "2.5 is not an integer", fe.Problem)
		var r RecordStep
		err = DecodeBody(appendValue(nil, omap{{"function_id", 0x1p63}}), &r)
		require.True(t, errors.As(err, &fe))
		require.Equal(t, "function_id: 9.223372036854776e+18 is out of range (-2^63 to 2^63-1)", fe.Error())
	})
	t.Run("floats elsewhere are left alone", func(t *testing.T) {
		t.Parallel()
		var q RegisterQueues
		require.NoError(t, DecodeBody(appendValue(nil, omap{{"queues", []any{omap{{"name", "q"},
			{"rate_limit_max", 10.0}, {"rate_limit_period_sec", 1.5}, {"polling_interval_sec", 2.0}, {"unknown", 0.5}}}}}), &q))
		require.Equal(t, 10, *q.Queues[0].RateLimitMax)
		require.Equal(t, 1.5, *q.Queues[0].RateLimitPeriodSec)
		require.Equal(t, 2.0, q.Queues[0].PollingIntervalSec)
	})
	t.Run("the envelope's kind and id", func(t *testing.T) {
		t.Parallel()
		env, err := DecodeEnvelope(appendValue(nil, omap{{"kind", 1.0}, {"id", 0x1p53}, {"op", "ping"}}))
		require.NoError(t, err)
		require.Equal(t, KindRequest, env.Kind)
		require.Equal(t, uint64(1)<<53, env.ID)
		// A frame refused for its body is answered with a float id too.
		env, err = DecodeEnvelope(appendValue(nil, omap{{"kind", 1.0}, {"id", 12.0}, {"op", int64(1)}}))
		require.ErrorIs(t, err, ErrMalformed)
		require.Equal(t, uint64(12), env.ID)
	})
}
