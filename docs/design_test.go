// Package docs holds the design document; its test keeps the document
// true to the tree.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, one level up.
const root = ".."

// testDecls collects what test files declare.
const testDecls = "(tests)"

// decls maps each package directory to the names it declares at top level
// (types, functions, variables, constants), "Type.Method" for methods and
// "Type.Field" for struct fields, from its non-test Go files; what test
// files declare is under testDecls.
func decls(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		test := strings.HasSuffix(path, "_test.go")
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		if test {
			dir = testDecls // tests are named, never imported
		}
		m := out[dir]
		if m == nil {
			m = map[string]bool{}
			out[dir] = m
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					m[d.Name.Name] = true
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					m[id.Name+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						m[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, f := range st.Fields.List {
								for _, n := range f.Names {
									m[s.Name.Name+"."+n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							m[n.Name] = true
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDesignNamesExist checks every file, directory, Go name and C struct
// docs/design.md names in backquotes.
func TestDesignNamesExist(t *testing.T) {
	b, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	all := decls(t)
	// the last element of a package's directory is its name here
	pkgs := map[string]string{}
	for dir := range all {
		pkgs[filepath.Base(dir)] = dir
	}
	declared := func(name string) bool {
		for _, m := range all {
			if m[name] {
				return true
			}
			if !strings.Contains(name, ".") {
				for k := range m {
					if strings.HasSuffix(k, "."+name) {
						return true
					}
				}
			}
		}
		return false
	}
	var headers strings.Builder
	hs, _ := filepath.Glob(filepath.Join(root, "bpf", "*.h"))
	for _, h := range hs {
		c, err := os.ReadFile(h)
		if err != nil {
			t.Fatal(err)
		}
		headers.Write(c)
	}

	quoted := regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(doc, -1)
	goName := regexp.MustCompile(`^([A-Za-z_]\w*)\.([A-Za-z_]\w*)$`)
	cStruct := regexp.MustCompile(`^struct (sq_\w+)$`)
	path := regexp.MustCompile(`^[\w.-]+(/[\w.*-]*)+$`)
	files, names, structs := 0, 0, 0
	for _, q := range quoted {
		s := q[1]
		switch {
		case path.MatchString(s) && !strings.HasPrefix(s, "/"):
			files++
			if m, _ := filepath.Glob(filepath.Join(root, s)); len(m) == 0 {
				t.Errorf("design.md names %s, which is not in the tree", s)
			}
		case goName.MatchString(s) && !strings.Contains(s, ".h") && !strings.HasSuffix(s, ".md"):
			m := goName.FindStringSubmatch(s)
			names++
			if dir, ok := pkgs[m[1]]; ok {
				if !all[dir][m[2]] {
					t.Errorf("design.md names %s: package %s declares no %s", s, dir, m[2])
				}
			} else if !declared(s) {
				t.Errorf("design.md names %s: no type %s with a method %s", s, m[1], m[2])
			}
		case cStruct.MatchString(s):
			structs++
			if !strings.Contains(headers.String(), s+" {") {
				t.Errorf("design.md names %s, which bpf/*.h does not define", s)
			}
		}
	}
	for _, id := range regexp.MustCompile("`([A-Za-z_]\\w*)`").FindAllStringSubmatch(doc, -1) {
		// a bare Go name the document points at (diagInfos, afterPost)
		if strings.ContainsAny(id[1], "_") || strings.ToLower(id[1]) == id[1] && !declared(id[1]) {
			continue // C names, flags and words, not Go declarations
		}
		names++
		if !declared(id[1]) {
			t.Errorf("design.md names %s, which no package declares", id[1])
		}
	}
	if files < 20 || names < 20 || structs < 1 {
		t.Errorf("found only %d paths, %d Go names and %d C structs in design.md: is the check still reading it?", files, names, structs)
	}
}
