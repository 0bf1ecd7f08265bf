package streamtest

import (
	"strings"
	"testing"
)

// CheckText fails t unless text, what holds the words of the analysis of
// a stream (the analyzer's own words, the report's text), holds every
// string of want and none of no.
func CheckText(t testing.TB, what, text string, want, no []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lack %q:\n%s", what, w, text)
		}
	}
	for _, n := range no {
		if strings.Contains(text, n) {
			t.Errorf("%s say %q:\n%s", what, n, text)
		}
	}
}

// Want is what a test expects of the stream named name (a Case's),
// failing t when it expects nothing of it: a stream added to a list is
// checked by every test that runs the list, or the test says so.
func Want[W any](t testing.TB, wants map[string]W, name string) W {
	t.Helper()
	w, ok := wants[name]
	if !ok {
		t.Fatalf("no expectation of the stream %q", name)
	}
	return w
}
