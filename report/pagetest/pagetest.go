// Package pagetest reads, for tests, the HTML pages sqscope writes
// (report --html, diff --html): a strict parse of the page, the check that
// it fetches nothing, and a run of its script under node on a small DOM
// (dom.js).
package pagetest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
)

//go:embed dom.js
var domJS []byte

// Page is what a strict XML parse of a page finds.
type Page struct {
	Data  []byte   // the JSON of #sqscope-data
	Rows  []string // data-qp of each table row
	Links []string // every src and href
	Text  string   // the character data outside scripts and styles
}

// Parse parses page as XML, strictly: every element closed, every entity
// known. It fails t on the first error, and when the page could fetch
// anything.
func Parse(t testing.TB, page []byte) Page {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	var p Page
	var text strings.Builder
	var inData, inCode bool
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("page is not well-formed: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range e.Attr {
				attr[a.Name.Local] = a.Value
				if a.Name.Local == "src" || a.Name.Local == "href" {
					p.Links = append(p.Links, a.Value)
				}
			}
			switch {
			case e.Name.Local == "script" && attr["id"] == "sqscope-data":
				inData = true
			case e.Name.Local == "script" || e.Name.Local == "style":
				inCode = true
			case e.Name.Local == "tr" && attr["data-qp"] != "":
				p.Rows = append(p.Rows, attr["data-qp"])
			}
		case xml.EndElement:
			inData, inCode = false, false
		case xml.CharData:
			switch {
			case inData:
				p.Data = append(p.Data, e...)
			case !inCode:
				text.Write(e)
			}
		}
	}
	if !json.Valid(p.Data) {
		t.Fatalf("the page's data is not JSON: %.200s", p.Data)
	}
	p.Text = text.String()
	for _, l := range p.Links {
		if strings.Contains(l, "://") || strings.HasPrefix(l, "//") {
			t.Errorf("the page links to %q: it must need no network", l)
		}
	}
	for _, bad := range []string{`src="http`, `href="http`, `src='http`, `href='http`, `src="//`, `href="//`, "@import", "url("} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("the page holds %q: it must need no network", bad)
		}
	}
	return p
}

// RunScript runs the page's script under node on dom.js's small DOM,
// which works the page's controls, and decodes what dom.js saw into out.
// Without node it skips t, or fails it where every test must run
// (bpftest.RequireTool).
func RunScript(t testing.TB, page []byte, out any) {
	t.Helper()
	node := bpftest.RequireTool(t, "node", "nodejs")
	dir := t.TempDir()
	path, dom := filepath.Join(dir, "page.html"), filepath.Join(dir, "dom.js")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dom, domJS, 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(node, dom, path)
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("the page's script failed: %v\n%s", err, stderr.Bytes())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("dom.js printed %q: %v", b, err)
	}
}
