package values

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pickles has python3 pickle each expression as DBOS Python's default
// serializer does (base64 of pickle.dumps at the default protocol) and
// returns the stored strings with Python's repr of each value.
func pickles(t *testing.T, preamble string, exprs []string) (stored, pyRepr []string) {
	t.Helper()
	script := `
import base64, json, pickle, sys, datetime, decimal, enum, dataclasses, collections
` + preamble + `
for expr in json.load(sys.stdin):
    value = eval(expr)
    print(json.dumps([base64.b64encode(pickle.dumps(value)).decode("utf-8"), repr(value)]))
`
	in, err := json.Marshal(exprs)
	require.NoError(t, err)
	cmd := exec.Command("python3", "-c", script)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	require.NoError(t, err, "python3 must be installed to make the pickles")
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var pair [2]string
		require.NoError(t, json.Unmarshal([]byte(line), &pair))
		stored, pyRepr = append(stored, pair[0]), append(pyRepr, pair[1])
	}
	require.Len(t, stored, len(exprs))
	return stored, pyRepr
}

func ptr(s string) *string { return &s }

// Plain data is shown exactly as Python's repr shows it.
func TestPlainDataIsShownAsPythonShowsIt(t *testing.T) {
	exprs := []string{
		`None`, `True`, `False`, `0`, `-7`, `2**70`, `-(2**64)`, `1.0`, `-0.5`, `1e-05`, `1e16`, `3.141592653589793`,
		`float("inf")`, `float("nan")`,
		`"hello"`, `""`, `"it's"`, `'say "hi"'`, `"tab\tnew\nline\\"`, `"héllo ☃"`,
		`b"\x00ab'\xff"`, `b""`, `[1, "two", None, [3.5]]`, `()`, `(1,)`, `(1, 2)`,
		`{"args": (1, "a"), "kwargs": {"flag": True}}`, `{1: "one", (2, 3): [4]}`, `{}`, `[{"nested": {"deep": [b"x"]}}]`,
		`set()`, `{3, 1, 2}`, `frozenset({"a"})`,
	}
	stored, pyRepr := pickles(t, "", exprs)
	for i, expr := range exprs {
		got, err := DecodePickle(stored[i])
		require.NoError(t, err, expr)
		if strings.HasPrefix(pyRepr[i], "{") && strings.Contains(expr, "{3") {
			require.Equal(t, "{1, 2, 3}", got, expr) // sets shown sorted
			continue
		}
		require.Equal(t, pyRepr[i], got, expr)
		require.Equal(t, pyRepr[i], Display(ptr(PyPickle), stored[i]), expr)
	}
}

// Anything that is not plain data is shown by its class; what a pickle
// rebuilds by calling the class (an exception and its args, an enum member,
// a Decimal, a datetime) is shown with the arguments of that call.
func TestObjectsAreShownByClassName(t *testing.T) {
	preamble := `
class Color(enum.Enum):
    RED = 1

@dataclasses.dataclass
class Order:
    id: int
    items: list

class CustomError(Exception):
    pass

class Plain:
    def __init__(self):
        self.secret = "not shown"
`
	cases := []struct{ expr, want string }{
		{`ValueError("boom")`, `ValueError('boom')`},
		{`KeyError("sku", 3)`, `KeyError('sku', 3)`},
		{`CustomError("out of stock")`, `__main__.CustomError('out of stock')`},
		{`Exception()`, `Exception()`},
		{`Order(7, ["a"])`, `<__main__.Order object>`},
		{`Plain()`, `<__main__.Plain object>`},
		{`Color.RED`, `__main__.Color(1)`},
		{`decimal.Decimal("1.50")`, `decimal.Decimal('1.50')`},
		{`{"when": datetime.date(2026, 1, 2)}`, `{'when': datetime.date(2026, 1, 2)}`},
		{`datetime.datetime(2026, 1, 2, 3, 4)`, `datetime.datetime(2026, 1, 2, 3, 4)`},
		{`datetime.datetime(2026, 1, 2, 3, 4, 0, 5)`, `datetime.datetime(2026, 1, 2, 3, 4, 0, 5)`},
		{`datetime.datetime(2026, 12, 31, 23, 59, 58)`, `datetime.datetime(2026, 12, 31, 23, 59, 58)`},
		{`collections.OrderedDict([("b", 1), ("a", 2)])`, `OrderedDict({'b': 1, 'a': 2})`},
		{`[ValueError("inner"), 1]`, `[ValueError('inner'), 1]`},
	}
	exprs := make([]string, len(cases))
	for i, c := range cases {
		exprs[i] = c.expr
	}
	stored, _ := pickles(t, preamble, exprs)
	for i, c := range cases {
		got, err := DecodePickle(stored[i])
		require.NoError(t, err, c.expr)
		require.Equal(t, c.want, got, c.expr)
	}
}

func TestDisplay(t *testing.T) {
	cases := []struct {
		name          string
		serialization *string
		stored, want  string
	}{
		{"portable_json compacted", ptr(PortableJSON), "{\n  \"a\": [1, 2]\n}", `{"a":[1,2]}`},
		{"portable_json invalid shown as stored", ptr(PortableJSON), "{oops", "{oops"},
		{"untagged pickle decoded", nil, "gASVCQAAAAAAAACMBWhlbGxvlC4=", `'hello'`},
		{"untagged text shown as stored", nil, "plain text", "plain text"},
		{"base64 that is not a pickle shown as stored", ptr(PyPickle), "aGVsbG8=", "aGVsbG8="},
		{"truncated pickle shown as stored", ptr(PyPickle), "gASVCQAAAAAAAACMBWhl", "gASVCQAAAAAAAACMBWhl"},
		{"DBOS_JSON decoded", ptr(GoJSON), "eyJmcm9tIjoiZ28ifQ==", `{"from":"go"}`},
		{"DBOS_JSON not base64 shown as stored", ptr(GoJSON), `{"json":1}`, `{"json":1}`},
		{"unknown format shown as stored", ptr("custom_text"), "gASVCQAAAAAAAACMBWhlbGxvlC4=", "gASVCQAAAAAAAACMBWhlbGxvlC4="},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, Display(c.serialization, c.stored))
		})
	}
}
