package perfetto

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestSubsetMatchesUpstream checks that every field and enum value
// trace_subset.proto declares is declared the same way (label, type, name,
// number) in the message of the same name upstream.
func TestSubsetMatchesUpstream(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	upstream := map[string]string{
		"Trace":        read("proto/reference/trace.proto"),
		"TracePacket":  read("proto/reference/trace_packet.proto"),
		"InternedData": read("proto/reference/interned_data.proto"),
	}
	space := regexp.MustCompile(`\s+`)
	field := regexp.MustCompile(`^((optional |repeated )?[\w.]+ )?\w+ = \d+;$`) // a field or an enum value
	message := regexp.MustCompile(`^message (\w+) \{$`)
	var msg string
	checked := 0
	for _, line := range strings.Split(read("proto/sqscope/trace_subset.proto"), "\n") {
		line = strings.TrimSpace(line)
		if m := message.FindStringSubmatch(line); m != nil {
			msg = m[1]
			continue
		}
		if !field.MatchString(line) || msg == "" {
			continue
		}
		up, ok := upstream[msg]
		if !ok {
			t.Fatalf("message %s has no upstream copy", msg)
		}
		found := false
		for _, l := range strings.Split(up, "\n") {
			if space.ReplaceAllString(strings.TrimSpace(l), " ") == line {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: %q is not declared so upstream", msg, line)
		}
		checked++
	}
	if checked < 15 {
		t.Errorf("checked %d declarations: the subset's parser missed some", checked)
	}
}
