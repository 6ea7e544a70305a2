// Package values renders the inputs, outputs, errors and payloads DBOS stores
// for people to read: portable_json as the JSON it is, DBOS_JSON (the DBOS
// Go SDK's base64 of JSON) as that JSON, and py_pickle (DBOS
// Python's default: the base64 of a pickle) decoded, without running any of
// it, into what Python's repr would show for plain data (None, bools,
// numbers, str, bytes, lists, tuples, dicts, sets) and into the class name
// (module.Class) for anything else, with the arguments the pickle calls the
// class with (an exception's args) when it calls it. Values in a format it
// does not know, or that do not decode, are shown as stored.
package values

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// The serialization tags DBOS stores beside a value.
const (
	PortableJSON = "portable_json"
	PyPickle     = "py_pickle"
	// GoJSON is the DBOS Go SDK's: the base64 of the value's JSON.
	GoJSON = "DBOS_JSON"
)

// Display is stored (tagged serialization, nil when the row has no tag) as
// people read it. Rows without a tag are DBOS Python's from before the tag
// existed, pickles, and are decoded as such when they are one.
func Display(serialization *string, stored string) string {
	tag := ""
	if serialization != nil {
		tag = *serialization
	}
	switch tag {
	case PortableJSON:
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(stored)); err != nil {
			return stored
		}
		return compact.String()
	case GoJSON:
		raw, err := base64.StdEncoding.DecodeString(stored)
		var compact bytes.Buffer
		if err == nil && json.Compact(&compact, raw) == nil {
			return compact.String()
		}
	case PyPickle, "":
		if shown, err := DecodePickle(stored); err == nil {
			return shown
		}
	}
	return stored
}

// DecodePickle renders a base64 pickle as Python's repr would show it,
// classes other than the plain data types by name.
func DecodePickle(encoded string) (string, error) {
	v, err := loadPickle(encoded)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	repr(&b, v)
	return b.String(), nil
}

// loadPickle decodes a base64 pickle into gopickle's values, classes as
// *class and their instances as *object.
func loadPickle(encoded string) (interface{}, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	// Protocol 2 and later begin with PROTO; DBOS Python writes the default
	// protocol (4 or 5). Anything else is not taken for a pickle, so that a
	// base64-looking string of another format is shown as stored.
	if len(raw) < 2 || raw[0] != 0x80 {
		return nil, fmt.Errorf("not a pickle")
	}
	u := pickle.NewUnpickler(bytes.NewReader(raw))
	u.FindClass = func(module, name string) (interface{}, error) {
		return &class{module: module, name: name}, nil
	}
	u.PersistentLoad = func(id interface{}) (interface{}, error) {
		return nil, fmt.Errorf("persistent id %v", id)
	}
	return u.Load()
}

// class is a class (or function) a pickle names. Nothing is imported or
// run: calling it records the call.
type class struct{ module, name string }

func (c *class) qualified() string {
	if c.module == "builtins" {
		return c.name
	}
	return c.module + "." + c.name
}

// Call is the pickle's REDUCE: how exceptions (cls, args), enums, Decimal
// and datetime are rebuilt.
func (c *class) Call(args ...interface{}) (interface{}, error) {
	if c.module == "datetime" && len(args) > 0 {
		if state, ok := args[0].([]byte); ok {
			if fields, ok := datetimeFields(c.name, state); ok {
				// Shown as Python shows it: datetime.date(2026, 1, 2).
				return &object{class: c, args: append(fields, args[1:]...), called: true}, nil
			}
		}
	}
	return &object{class: c, args: args, called: true}, nil
}

// datetimeFields unpacks the bytes a datetime.date or datetime.datetime
// pickles its fields as (year in two bytes, then one byte a field,
// microseconds in three), dropping trailing zero seconds and microseconds
// as Python's repr does.
func datetimeFields(name string, state []byte) ([]interface{}, bool) {
	switch {
	case name == "date" && len(state) == 4:
		return []interface{}{int(state[0])<<8 | int(state[1]), int(state[2]), int(state[3])}, true
	case name == "datetime" && len(state) == 10:
		fields := []interface{}{int(state[0])<<8 | int(state[1]), int(state[2]), int(state[3]),
			int(state[4]), int(state[5]), int(state[6]), int(state[7])<<16 | int(state[8])<<8 | int(state[9])}
		for len(fields) > 5 && fields[len(fields)-1] == 0 {
			fields = fields[:len(fields)-1]
		}
		return fields, true
	}
	return nil, false
}

// PyNew is NEWOBJ: how instances of ordinary classes and dataclasses are
// rebuilt, their state following (and ignored: the class name is shown).
func (c *class) PyNew(args ...interface{}) (interface{}, error) {
	return &object{class: c, args: args}, nil
}

// object is an instance of a class.
type object struct {
	class  *class
	args   []interface{}
	called bool
}

// PySetState takes the object's state (BUILD), which is not shown.
func (o *object) PySetState(interface{}) error { return nil }

func repr(b *strings.Builder, v interface{}) {
	switch v := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if v {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int:
		b.WriteString(strconv.Itoa(v))
	case *big.Int:
		b.WriteString(v.String())
	case float64:
		b.WriteString(floatRepr(v))
	case string:
		b.WriteString(strRepr(v))
	case []byte:
		b.WriteString(bytesRepr(v))
	case *types.ByteArray:
		b.WriteString("bytearray(" + bytesRepr(*v) + ")")
	case *types.List:
		seq(b, "[", "]", *v)
	case *types.Tuple:
		if len(*v) == 1 {
			b.WriteString("(")
			repr(b, (*v)[0])
			b.WriteString(",)")
			return
		}
		seq(b, "(", ")", *v)
	case *types.Dict:
		b.WriteString("{")
		for i, e := range *v {
			if i > 0 {
				b.WriteString(", ")
			}
			repr(b, e.Key)
			b.WriteString(": ")
			repr(b, e.Value)
		}
		b.WriteString("}")
	case *types.OrderedDict:
		b.WriteString("OrderedDict({")
		i := 0
		for el := v.List.Front(); el != nil; el = el.Next() {
			e := el.Value.(*types.OrderedDictEntry)
			if i > 0 {
				b.WriteString(", ")
			}
			i++
			repr(b, e.Key)
			b.WriteString(": ")
			repr(b, e.Value)
		}
		b.WriteString("})")
	case *types.Set:
		keys := make([]interface{}, 0, len(*v))
		for k := range *v {
			keys = append(keys, k)
		}
		set(b, "set()", "{", "}", keys)
	case *types.FrozenSet:
		keys := make([]interface{}, 0, len(*v))
		for k := range *v {
			keys = append(keys, k)
		}
		set(b, "frozenset()", "frozenset({", "})", keys)
	case *class:
		b.WriteString("<class '" + v.module + "." + v.name + "'>")
	case *object:
		if v.called {
			// An exception's args, an enum's value, a Decimal's digits.
			b.WriteString(v.class.qualified())
			seq(b, "(", ")", v.args)
			return
		}
		b.WriteString("<" + v.class.qualified() + " object>")
	default:
		fmt.Fprintf(b, "%v", v)
	}
}

func seq(b *strings.Builder, open, closing string, items []interface{}) {
	b.WriteString(open)
	for i, item := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		repr(b, item)
	}
	b.WriteString(closing)
}

// set writes a set's members in a stable order (their reprs sorted), as
// the decoded set has none.
func set(b *strings.Builder, empty, open, closing string, members []interface{}) {
	if len(members) == 0 {
		b.WriteString(empty)
		return
	}
	shown := make([]string, len(members))
	for i, m := range members {
		var mb strings.Builder
		repr(&mb, m)
		shown[i] = mb.String()
	}
	sort.Strings(shown)
	b.WriteString(open + strings.Join(shown, ", ") + closing)
}

// floatRepr is Python's repr of a float: the shortest form that reads back,
// always with a point or an exponent.
func floatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// strRepr quotes s as Python's repr does: single quotes unless s has one
// and no double quote.
func strRepr(s string) string {
	quote := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// bytesRepr is Python's repr of bytes: b'...' with printable ASCII as is.
func bytesRepr(p []byte) string {
	quote := byte('\'')
	if bytes.IndexByte(p, '\'') >= 0 && bytes.IndexByte(p, '"') < 0 {
		quote = '"'
	}
	var b strings.Builder
	b.WriteString("b")
	b.WriteByte(quote)
	for _, c := range p {
		switch {
		case c == quote || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte(quote)
	return b.String()
}
