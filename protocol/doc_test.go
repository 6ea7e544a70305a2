package protocol

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	protocolDoc    = "PROTOCOL.md"
	catalogBegin   = "<!-- BEGIN GENERATED error catalog: go test ./protocol -run TestProtocolDoc -update -->"
	catalogEnd     = "<!-- END GENERATED error catalog -->"
	hexdumpColumns = 48 // the hex column of the worked examples
)

// catalogTable renders Catalog as the Markdown table of PROTOCOL.md.
func catalogTable() string {
	var b strings.Builder
	b.WriteString("| code | name | DBOS exception | retryable | closes | meaning |\n")
	b.WriteString("|---:|---|---|---|---|---|\n")
	yes := map[bool]string{true: "yes", false: "no"}
	for _, c := range Catalog {
		dbos := "-"
		if c.DBOSName != "" {
			dbos = "`" + c.DBOSName + "`"
		}
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s | %s | %s |\n", c.Code, c.Name, dbos, yes[c.Retryable], yes[c.CloseConnection], c.Doc)
	}
	return b.String()
}

// TestProtocolDoc keeps PROTOCOL.md's error table equal to Catalog and its
// hex examples equal to the golden vectors.
func TestProtocolDoc(t *testing.T) {
	raw, err := os.ReadFile(protocolDoc)
	require.NoError(t, err)
	doc := string(raw)
	begin := strings.Index(doc, catalogBegin)
	end := strings.Index(doc, catalogEnd)
	require.True(t, begin >= 0 && end > begin, "PROTOCOL.md lacks the generated error catalog markers")
	want := doc[:begin+len(catalogBegin)] + "\n" + catalogTable() + doc[end:]
	if *update && want != doc {
		require.NoError(t, os.WriteFile(protocolDoc, []byte(want), 0o644))
		doc = want
	}
	require.Equal(t, want, doc, "PROTOCOL.md's error table differs from Catalog; run: go test ./protocol -run TestProtocolDoc -update")

	vectorsJSON, err := os.ReadFile(vectorsFile)
	require.NoError(t, err)
	var vectors []vector
	require.NoError(t, json.Unmarshal(vectorsJSON, &vectors))
	byName := map[string]vector{}
	for _, v := range vectors {
		byName[v.Name] = v
	}
	blocks := regexp.MustCompile("(?s)```hexdump (\\w+)\n(.*?)\n```").FindAllStringSubmatch(doc, -1)
	require.NotEmpty(t, blocks)
	for _, m := range blocks {
		v, ok := byName[m[1]]
		require.True(t, ok, "PROTOCOL.md shows vector %s, which does not exist", m[1])
		var hexDigits strings.Builder
		for _, line := range strings.Split(m[2], "\n") {
			if len(line) > hexdumpColumns {
				line = line[:hexdumpColumns]
			}
			hexDigits.WriteString(strings.ReplaceAll(line, " ", ""))
		}
		require.Equal(t, v.Hex, hexDigits.String(), "the hex of %s in PROTOCOL.md", m[1])
	}
	for _, m := range regexp.MustCompile("vectors? `(\\w+)`").FindAllStringSubmatch(doc, -1) {
		_, ok := byName[m[1]]
		require.True(t, ok, "PROTOCOL.md names vector %s, which does not exist", m[1])
	}
}
