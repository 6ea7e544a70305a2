package protocol

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

const errorCodesFile = "testdata/error_codes.json"

// TestErrorCatalogFile keeps testdata/error_codes.json, which the Python and
// Node bindings check their error tables against, equal to Catalog.
func TestErrorCatalogFile(t *testing.T) {
	generated := marshalFile(t, Catalog)
	if *update {
		require.NoError(t, os.WriteFile(errorCodesFile, generated, 0o644))
	}
	onDisk, err := os.ReadFile(errorCodesFile)
	require.NoError(t, err)
	require.Equal(t, string(generated), string(onDisk),
		"%s differs from protocol.Catalog; run: go test ./protocol -run TestErrorCatalogFile -update", errorCodesFile)
}

var snakeCase = regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)

func TestErrorCatalogIsConsistent(t *testing.T) {
	t.Parallel()
	codes := map[Code]bool{}
	names := map[string]bool{}
	for i, info := range Catalog {
		require.False(t, codes[info.Code], "code %d listed twice", info.Code)
		require.False(t, names[info.Name], "name %s listed twice", info.Name)
		codes[info.Code], names[info.Name] = true, true
		require.Regexp(t, snakeCase, info.Name)
		require.NotEmpty(t, info.Doc, info.Name)
		if info.DBOSName != "" {
			require.Regexp(t, `^[A-Z][A-Za-z]*Error$|^DBOSException$`, info.DBOSName, info.Name)
		}
		if i > 0 {
			require.Less(t, Catalog[i-1].Code, info.Code, "Catalog is in numeric order")
		}
		// 1xx: the request was not understood; 2xx: it was refused.
		require.True(t, (info.Code >= 100 && info.Code < 200) || (info.Code >= 200 && info.Code < 300), info.Name)
		got, ok := info.Code.Info()
		require.True(t, ok)
		require.Equal(t, info, got)
		require.Equal(t, info.Name, info.Code.String())
	}
	require.Equal(t, "code_999", Code(999).String())
	_, ok := Code(999).Info()
	require.False(t, ok)
}

// TestEveryCodeConstantIsInCatalog reads errors.go, so that a constant added
// without its catalog entry fails here rather than in a binding.
func TestEveryCodeConstantIsInCatalog(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "errors.go", nil, 0)
	require.NoError(t, err)
	found := 0
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				require.True(t, ok, "%s is a literal", name.Name)
				n, ok := constant.Uint64Val(constant.MakeFromLiteral(lit.Value, lit.Kind, 0))
				require.True(t, ok)
				_, inCatalog := Code(n).Info()
				require.True(t, inCatalog, "%s (%d) is not in Catalog", name.Name, n)
				found++
			}
		}
	}
	require.Equal(t, len(Catalog), found, "Catalog has entries without a constant")
}

func TestErrorf(t *testing.T) {
	t.Parallel()
	e := Errorf(CodeFenced, "workflow %s is no longer owned by this run", "w1")
	require.Equal(t, CodeFenced, e.Code)
	require.Equal(t, "fenced", e.Name)
	require.Equal(t, "fenced: workflow w1 is no longer owned by this run", e.Error())
}
