package values

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pythonStrs has python3 store each expression as DBOS Python does (a
// base64 pickle; with portable, the JSON text) and returns what str() of
// the value read back shows, for each.
func pythonStrs(t *testing.T, script string, exprs []string) (stored, shown []string) {
	t.Helper()
	in, err := json.Marshal(exprs)
	require.NoError(t, err)
	cmd := exec.Command("python3", "-c", script)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	require.NoError(t, err, "python3 must be installed to make the values")
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var pair [2]string
		require.NoError(t, json.Unmarshal([]byte(line), &pair))
		stored, shown = append(stored, pair[0]), append(shown, pair[1])
	}
	require.Len(t, stored, len(exprs))
	return stored, shown
}

const pickleStrScript = `
import base64, json, pickle, sys
class Boom(Exception):
    pass
for expr in json.load(sys.stdin):
    value = eval(expr)
    print(json.dumps([base64.b64encode(pickle.dumps(value)).decode("utf-8"), str(value)]))
`

// A pickled value is shown as str() shows it: a string bare, anything else
// as its repr.
func TestPythonStrOfPickledValues(t *testing.T) {
	exprs := []string{`"just text"`, `""`, `3`, `1.5`, `None`, `True`, `[1, "a"]`, `("a", "b")`,
		`{"args": (1, 2), "kwargs": {"label": "lbl"}}`, `{"sum": 3, "none": None, "f": 1.5}`, `b"raw"`}
	stored, shown := pythonStrs(t, pickleStrScript, exprs)
	for i, expr := range exprs {
		require.Equal(t, shown[i], PythonStr(KindValue, ptr(PyPickle), stored[i]), expr)
		require.Equal(t, shown[i], PythonStr(KindValue, nil, stored[i]), "untagged: "+expr)
	}
}

// A pickled exception is shown as str(exception) shows it.
func TestPythonStrOfPickledExceptions(t *testing.T) {
	exprs := []string{`Boom("it broke")`, `ValueError("bad value")`, `Exception()`, `Exception(5)`,
		`Exception("a", 2)`, `KeyError("k")`}
	stored, shown := pythonStrs(t, pickleStrScript, exprs)
	for i, expr := range exprs {
		got := PythonStr(KindError, ptr(PyPickle), stored[i])
		if expr == `KeyError("k")` {
			// KeyError's own __str__ quotes its key; the agent, which
			// runs no class's code, shows the message as BaseException does.
			require.Equal(t, "k", got)
			require.Equal(t, "'k'", shown[i])
			continue
		}
		require.Equal(t, shown[i], got, expr)
	}
}

const portableStrScript = `
import json, sys
for expr in json.load(sys.stdin):
    text = json.dumps(eval(expr), separators=(",", ":"))
    print(json.dumps([text, str(json.loads(text))]))
`

// portable_json is shown as str() of what json.loads makes of it.
func TestPythonStrOfPortableJSON(t *testing.T) {
	exprs := []string{`"text"`, `7`, `2.5`, `1e20`, `None`, `False`, `[1, "two", None]`,
		`{"b": 1, "a": [True, {"c": "it's"}]}`, `{}`}
	stored, shown := pythonStrs(t, portableStrScript, exprs)
	for i, expr := range exprs {
		require.Equal(t, shown[i], PythonStr(KindValue, ptr(PortableJSON), stored[i]), expr)
	}
}

// Portable inputs and errors are shown as DBOS Python reads them: the
// arguments as {'args': (...), 'kwargs': {...}}, an error as its message.
func TestPythonStrOfPortableInputsAndErrors(t *testing.T) {
	require.Equal(t, "{'args': (1, 'a'), 'kwargs': {'flag': True}}",
		PythonStr(KindInputs, ptr(PortableJSON), `{"positionalArgs":[1,"a"],"namedArgs":{"flag":true}}`))
	require.Equal(t, "{'args': ('only',), 'kwargs': {}}",
		PythonStr(KindInputs, ptr(PortableJSON), `{"positionalArgs":["only"]}`))
	require.Equal(t, "card declined",
		PythonStr(KindError, ptr(PortableJSON), `{"name":"PaymentError","message":"card declined","code":402}`))
}

// What cannot be decoded is shown as Display shows it, never dropped.
func TestPythonStrOfOtherFormats(t *testing.T) {
	require.Equal(t, "not base64!", PythonStr(KindValue, ptr(PyPickle), "not base64!"))
	require.Equal(t, `{"x":1}`, PythonStr(KindValue, ptr(GoJSON), "eyJ4IjogMX0="))
	require.Equal(t, "opaque", PythonStr(KindValue, ptr("custom_serializer"), "opaque"))
	// Nesting past the bound is shown as stored, not followed.
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	require.Equal(t, deep, PythonStr(KindValue, ptr(PortableJSON), deep))
}

// Attributes are shown as DBOS shows them: json.dumps of the stored JSON.
func TestPythonJSONDumps(t *testing.T) {
	script := `
import json, sys
for expr in json.load(sys.stdin):
    text = json.dumps(eval(expr), separators=(",", ":"), ensure_ascii=False)
    print(json.dumps([text, json.dumps(json.loads(text))]))
`
	exprs := []string{`{"team": "core", "n": 3, "f": 2.0, "ok": True}`, `{"name": "héllo ☃ 😀", "tab": "a\tb"}`, `[1, None, {"z": [], "a": {}}]`}
	stored, shown := pythonStrs(t, script, exprs)
	for i, expr := range exprs {
		got, ok := PythonJSONDumps(stored[i])
		require.True(t, ok)
		require.Equal(t, shown[i], got, expr)
	}
	_, ok := PythonJSONDumps("null")
	require.False(t, ok, "a stored JSON null is no value")
}
