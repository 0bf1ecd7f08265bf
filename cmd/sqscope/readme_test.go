package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const readme = "../../README.md"

// fencedBlocks are the README's code blocks, each as its lines joined
// with the newline that ends each.
func fencedBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	for _, l := range strings.SplitAfter(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "```") && cur == nil:
			cur = &strings.Builder{}
		case strings.HasPrefix(l, "```"):
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(l)
		}
	}
	if cur != nil {
		t.Fatalf("%s: a code block is not closed", readme)
	}
	return blocks
}

// The README's diff of its advise example: its commands are the ones the
// committed recordings were made with (adviseRuns, on adviseNIC), and the
// block after them is what sqscope diff prints of those recordings.
func TestReadmeDiffExample(t *testing.T) {
	blocks := fencedBlocks(t)
	all := strings.Join(blocks, "")
	if !strings.Contains(all, "NIC="+adviseNIC+"\n") {
		t.Errorf("the README's advise example does not set NIC=%s", adviseNIC)
	}
	for _, r := range adviseRuns {
		cmd := "sudo sqscope record -o " + r.file + " --workload -- " + r.flags + " --sim-nic $NIC\n"
		if !strings.Contains(all, cmd) {
			t.Errorf("the README does not record %s as the test does: %q", r.file, cmd)
		}
	}
	run := "sqscope diff " + adviseBefore + " " + adviseAfter + "\n"
	at := -1
	for i, b := range blocks {
		if strings.Contains(b, run) {
			at = i
		}
	}
	if at < 0 || at+1 >= len(blocks) {
		t.Fatalf("the README has no block running %q followed by its output", strings.TrimSpace(run))
	}
	dir, err := filepath.Abs(adviseDir)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := adviseDiff(t, dir)
	if got := blocks[at+1]; got != text {
		t.Errorf("the README's diff example is not what sqscope diff prints of %s:\n--- README\n%s--- sqscope diff\n%s", adviseDir, got, text)
	}
}

// The README's picture of the HTML report is one TestReportHTMLInBrowser
// made (go test ./cmd/sqscope -run TestReportHTMLInBrowser
// -update-screenshot): a drawn page of the browser window's size.
func TestReadmeScreenshot(t *testing.T) {
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel("../..", readmePNG)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "]("+filepath.ToSlash(rel)+")") {
		t.Errorf("%s shows no %s", readme, rel)
	}
	png, err := os.ReadFile(readmePNG)
	if err != nil {
		t.Fatal(err)
	}
	checkReadmePNG(t, readmePNG, png)
}
