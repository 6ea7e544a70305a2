package values

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Kind says what a stored value is, which changes how Python's str() reads
// it: a workflow's inputs, an error, or any other value.
type Kind int

const (
	// KindValue is an output, a step's output, an event or a message.
	KindValue Kind = iota
	// KindInputs is a workflow's stored arguments: DBOS Python shows them
	// as {'args': (...), 'kwargs': {...}} whichever format stored them.
	KindInputs
	// KindError is a stored exception: shown as str(exception), its
	// message.
	KindError
)

// PythonStr is the stored value as DBOS Python's admin server answered it:
// str() of the deserialized value. A string is itself, an exception its
// message (str(args[0]) for one argument, the args tuple for several),
// anything else its repr. Values the agent cannot decode (another
// language's format, a pickle that does not load) are shown as Display
// shows them.
func PythonStr(kind Kind, serialization *string, stored string) string {
	tag := ""
	if serialization != nil {
		tag = *serialization
	}
	switch tag {
	case PyPickle, "":
		v, err := loadPickle(stored)
		if err != nil {
			break
		}
		if kind == KindError {
			if o, ok := v.(*object); ok && o.called {
				return exceptionStr(o.args)
			}
		}
		if s, ok := v.(string); ok {
			return s
		}
		var b strings.Builder
		repr(&b, v)
		return b.String()
	case PortableJSON:
		if shown, ok := portableStr(kind, stored); ok {
			return shown
		}
	}
	return Display(serialization, stored)
}

// exceptionStr is BaseException.__str__ over an exception's args.
func exceptionStr(args []interface{}) string {
	switch len(args) {
	case 0:
		return ""
	case 1:
		if s, ok := args[0].(string); ok {
			return s
		}
		var b strings.Builder
		repr(&b, args[0])
		return b.String()
	}
	var b strings.Builder
	seq(&b, "(", ")", args)
	return b.String()
}

// portableStr reads portable_json as DBOS Python deserializes it (JSON
// objects as dicts in their order, arrays as lists; inputs as args and
// kwargs; an error as its message) and shows the result as str() would.
func portableStr(kind Kind, stored string) (string, bool) {
	v, err := decodeOrderedJSON(stored)
	if err != nil {
		return "", false
	}
	switch kind {
	case KindInputs:
		// {"positionalArgs": [...], "namedArgs": {...}} is read as
		// {'args': tuple(positionalArgs), 'kwargs': namedArgs or {}}.
		obj, ok := v.(jsonObject)
		if !ok {
			break
		}
		positional, _ := obj.get("positionalArgs").([]interface{})
		named, ok := obj.get("namedArgs").(jsonObject)
		if !ok {
			named = jsonObject{}
		}
		var b strings.Builder
		b.WriteString("{'args': ")
		jsonRepr(&b, jsonTuple(positional))
		b.WriteString(", 'kwargs': ")
		jsonRepr(&b, named)
		b.WriteString("}")
		return b.String(), true
	case KindError:
		// DBOS's portable error: {"name": ..., "message": ..., ...}; its
		// exception's str() is the message.
		if obj, ok := v.(jsonObject); ok {
			if msg, ok := obj.get("message").(string); ok {
				return msg, true
			}
		}
	}
	if s, ok := v.(string); ok {
		return s, true
	}
	var b strings.Builder
	jsonRepr(&b, v)
	return b.String(), true
}

// jsonObject keeps a JSON object's members in their order, as Python's
// json.loads does.
type jsonObject []jsonMember

type jsonMember struct {
	key   string
	value interface{}
}

func (o jsonObject) get(key string) interface{} {
	for _, m := range o {
		if m.key == key {
			return m.value
		}
	}
	return nil
}

// jsonTuple is a list shown as Python shows a tuple.
type jsonTuple []interface{}

func decodeOrderedJSON(text string) (interface{}, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	v, err := decodeJSONValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// maxJSONDepth bounds the nesting decodeOrderedJSON follows: a stored value
// comes from an application, and deeper text is shown as stored instead.
const maxJSONDepth = 1000

func decodeJSONValue(dec *json.Decoder, depth int) (interface{}, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("JSON nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			list := []interface{}{}
			for dec.More() {
				item, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				list = append(list, item)
			}
			_, err := dec.Token() // ]
			return list, err
		case '{':
			obj := jsonObject{}
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := keyTok.(string)
				value, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				obj = append(obj, jsonMember{key: key, value: value})
			}
			_, err := dec.Token() // }
			return obj, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// jsonRepr writes decoded JSON as Python's repr of what json.loads makes
// of it.
func jsonRepr(b *strings.Builder, v interface{}) {
	switch v := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		repr(b, v)
	case string:
		b.WriteString(strRepr(v))
	case json.Number:
		// Python reads an integer literal as int, anything with a point or
		// an exponent as float.
		if strings.ContainsAny(v.String(), ".eE") {
			if f, err := strconv.ParseFloat(v.String(), 64); err == nil {
				b.WriteString(floatRepr(f))
				return
			}
		}
		b.WriteString(v.String())
	case []interface{}:
		b.WriteString("[")
		for i, item := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			jsonRepr(b, item)
		}
		b.WriteString("]")
	case jsonTuple:
		b.WriteString("(")
		for i, item := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			jsonRepr(b, item)
		}
		if len(v) == 1 {
			b.WriteString(",")
		}
		b.WriteString(")")
	case jsonObject:
		b.WriteString("{")
		for i, m := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strRepr(m.key))
			b.WriteString(": ")
			jsonRepr(b, m.value)
		}
		b.WriteString("}")
	default:
		fmt.Fprintf(b, "%v", v)
	}
}

// PythonJSONDumps re-renders JSON text as DBOS Python's json.dumps of the
// value json.loads reads from it (its default separators, non-ASCII
// escaped). null is reported as no value (ok false), as DBOS reads a
// stored JSON null as None.
func PythonJSONDumps(text string) (string, bool) {
	v, err := decodeOrderedJSON(text)
	if err != nil {
		return text, true
	}
	if v == nil {
		return "", false
	}
	var b strings.Builder
	dumpJSON(&b, v)
	return b.String(), true
}

func dumpJSON(b *strings.Builder, v interface{}) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		b.WriteString(asciiJSONString(v))
	case json.Number:
		jsonRepr(b, v) // Python writes numbers as their repr
	case []interface{}:
		b.WriteString("[")
		for i, item := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			dumpJSON(b, item)
		}
		b.WriteString("]")
	case jsonObject:
		b.WriteString("{")
		for i, m := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(asciiJSONString(m.key))
			b.WriteString(": ")
			dumpJSON(b, m.value)
		}
		b.WriteString("}")
	}
}

// asciiJSONString quotes s as json.dumps does with ensure_ascii: anything
// beyond ASCII as \uXXXX (surrogate pairs above the BMP).
func asciiJSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (r >= 0x7f && r <= 0xffff):
			fmt.Fprintf(&b, `\u%04x`, r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
