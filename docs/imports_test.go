package docs

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sqscope/sqscope/"

// imports maps each package directory to the project packages (and "C")
// its files import: product files, and test files separately.
func imports(t *testing.T) (product, tests map[string]map[string]bool) {
	t.Helper()
	product, tests = map[string]map[string]bool{}, map[string]map[string]bool{}
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
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		into := product
		if strings.HasSuffix(path, "_test.go") {
			into = tests
		}
		if into[dir] == nil {
			into[dir] = map[string]bool{}
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p == "C" {
				into[dir]["C"] = true
			} else if strings.HasPrefix(p, module) {
				into[dir][strings.TrimPrefix(p, module)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return product, tests
}

// TestImportRules holds the packages to what docs/design.md says each may
// depend on.
func TestImportRules(t *testing.T) {
	product, tests := imports(t)
	allowed := map[string][]string{ // product code; "C" is cgo
		"ibv":                 {},
		"trace":               {"ibv"},
		"analyzer":            {"trace", "ibv"},
		"analyzer/streamtest": {"trace", "ibv"},
		"report":              {"analyzer", "trace"},
		"tui":                 {"analyzer", "report", "ibv"},
		"export":              {"analyzer", "export/perfetto", "trace", "ibv"},
		"export/perfetto":     {},
		"session":             {"analyzer", "probe", "trace", "ibv", "internal/outfile", "internal/durflag"},
		"probe":               {"bpf", "trace", "ibv", "probe/errsite", "internal/trapcost"},
		"probe/errsite":       {"ibv"},
		"verbs":               {"ibv", "verbs/nicmodel", "C"},
		"verbs/nicmodel":      {},
		"workload":            {"verbs", "ibv", "internal/outfile", "C"},
		"advise":              {"analyzer", "session", "trace", "verbs/nicmodel", "ibv"},
		"diff":                {"advise", "analyzer", "report", "session", "trace"},
		"reportpage":          {"advise", "analyzer", "report", "session", "trace", "verbs/nicmodel"},
		"serve":               {"analyzer", "session", "trace", "internal/durflag"},
		"internal/outfile":    {},
		"internal/bpftest":    {"internal/trapcost"},
		"internal/trapcost":   {},
		"internal/durflag":    {},
		"hostps":              {"ibv", "probe"},
		"cmd/internal/cli":    {"analyzer", "probe", "reportpage", "session", "trace", "verbs/nicmodel", "internal/outfile", "internal/durflag"},
	}
	for pkg, ok := range allowed {
		if product[pkg] == nil {
			t.Errorf("package %s not found", pkg)
			continue
		}
		for im := range product[pkg] {
			if !slices.Contains(ok, im) {
				t.Errorf("%s imports %s; it may import only %v", pkg, im, ok)
			}
		}
	}
	// The view's tests, too, see the analyzer and its report only.
	for im := range tests["tui"] {
		if !slices.Contains([]string{"analyzer", "analyzer/analyzertest", "report", "ibv"}, im) {
			t.Errorf("tui's tests import %s", im)
		}
	}
	for _, set := range []map[string]map[string]bool{product, tests} {
		for dir, ims := range set {
			if ims["tui"] && !strings.HasPrefix(dir, "cmd/") {
				t.Errorf("%s imports tui: only cmd/ may", dir)
			}
			if ims["bpf/bench"] && dir != "cmd/sqbench" {
				t.Errorf("%s imports the benchmark-only programs", dir)
			}
		}
	}
	// The analyzer's tests hold the model to its snapshot; the text is the
	// report's to test.
	for im := range tests["analyzer"] {
		if im == "report" {
			t.Errorf("analyzer's tests import report")
		}
	}
	if cycle := findCycle(product); cycle != nil {
		t.Errorf("import cycle: %s", strings.Join(cycle, " -> "))
	}
}

// findCycle returns one import cycle among the packages, or nil.
func findCycle(g map[string]map[string]bool) []string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(p string) []string
	visit = func(p string) []string {
		state[p] = open
		stack = append(stack, p)
		next := make([]string, 0, len(g[p]))
		for q := range g[p] {
			next = append(next, q)
		}
		sort.Strings(next)
		for _, q := range next {
			switch state[q] {
			case open:
				for i, s := range stack {
					if s == q {
						return append(append([]string(nil), stack[i:]...), q)
					}
				}
			case unseen:
				if c := visit(q); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[p] = done
		return nil
	}
	keys := make([]string, 0, len(g))
	for p := range g {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	for _, p := range keys {
		if state[p] == unseen {
			if c := visit(p); c != nil {
				return c
			}
		}
	}
	return nil
}

func TestFindCycle(t *testing.T) {
	g := map[string]map[string]bool{"a": {"b": true}, "b": {"c": true}, "c": {"a": true}, "d": {"a": true}}
	if c := findCycle(g); strings.Join(c, " ") != "a b c a" {
		t.Errorf("findCycle = %v, want a b c a", c)
	}
	delete(g["c"], "a")
	if c := findCycle(g); c != nil {
		t.Errorf("findCycle = %v on a graph without cycles", c)
	}
}
