package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestCreateMode(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		existing os.FileMode // 0: no file before Create
	}{
		{"new file", 0},
		{"existing world-readable file", 0o644},
		{"existing executable file", 0o777},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("rec%d.sqscope", i))
			if tc.existing != 0 {
				if err := os.WriteFile(path, bytes.Repeat([]byte("old"), 10000), tc.existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			w, err := Create(path, testInfo)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range manyEvents(20) {
				if err := w.Write(ev); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Errorf("second Close: %v, want nil", err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", st.Mode().Perm())
			}
			if st.Size() != w.Bytes() {
				t.Errorf("size %d, Bytes() %d", st.Size(), w.Bytes())
			}
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			n := 0
			for {
				if _, err := r.Next(); err != nil {
					if err != io.EOF {
						t.Fatal(err)
					}
					break
				}
				n++
			}
			if n != 20 {
				t.Errorf("read %d events, want 20", n)
			}
		})
	}
	if _, err := Create(filepath.Join(dir, "no", "such", "dir"), testInfo); err == nil ||
		!strings.HasPrefix(err.Error(), "creating recording: open ") {
		t.Errorf("Create in a missing directory: %v", err)
	}
}

// failWriter fails every write after the first n bytes.
type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n := f.n
		f.n = 0
		return n, errors.New("disk full")
	}
	f.n -= len(p)
	return len(p), nil
}

type foreignEvent struct{ Header }

func (*foreignEvent) Kind() Kind { return 99 }

func TestWriterErrors(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"nil event", nil, "cannot record a nil event"},
		{"nil post", (*Post)(nil), "cannot record a nil *trace.Post"},
		{"foreign type", &foreignEvent{}, "cannot record event of type *trace.foreignEvent"},
		{"too large", &Attach{Path: strings.Repeat("x", maxRecordBody)},
			fmt.Sprintf("attach event too large to record (%d bytes, limit %d)", maxRecordBody+11, maxRecordBody)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, testInfo)
			if err != nil {
				t.Fatal(err)
			}
			// Between two good events: the writer stays usable and the
			// refused event leaves no trace, also in what the block's
			// records after it are encoded against.
			good := manyEvents(2)
			if err := w.Write(good[0]); err != nil {
				t.Fatal(err)
			}
			if err := w.Write(tc.ev); err == nil || err.Error() != tc.want {
				t.Fatalf("Write: %v, want %q", err, tc.want)
			}
			if err := w.Write(good[1]); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			_, got, err := readAll(buf.Bytes())
			if err != io.EOF {
				t.Fatal(err)
			}
			assertEvents(t, got, good)
			if err := w.Write(good[0]); err == nil || err.Error() != "recording already closed" {
				t.Errorf("Write after Close: %v", err)
			}
			if err := w.Flush(); err == nil || err.Error() != "recording already closed" {
				t.Errorf("Flush after Close: %v", err)
			}
		})
	}

	t.Run("disk full sticks", func(t *testing.T) {
		fw := &failWriter{n: len(writeRecording(t, nil, 0)) + 5}
		w, err := NewWriter(fw, testInfo)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(manyEvents(1)[0]); err != nil {
			t.Fatal(err)
		}
		const want = "writing recording: disk full"
		if err := w.Flush(); err == nil || err.Error() != want {
			t.Fatalf("Flush: %v, want %q", err, want)
		}
		if err := w.Write(manyEvents(1)[0]); err == nil || err.Error() != want {
			t.Errorf("Write after failure: %v, want %q", err, want)
		}
		if err := w.Close(); err == nil || err.Error() != want {
			t.Errorf("Close after failure: %v, want %q", err, want)
		}
	})
	t.Run("header write fails", func(t *testing.T) {
		if _, err := NewWriter(&failWriter{n: 5}, testInfo); err == nil || err.Error() != "writing recording: disk full" {
			t.Errorf("NewWriter: %v", err)
		}
	})
}

// TestConcurrentFlush flushes from another goroutine, as a signal handler
// does, while events are written; run it with -race.
func TestConcurrentFlush(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testInfo)
	if err != nil {
		t.Fatal(err)
	}
	events := manyEvents(20000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	flushes := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := w.Flush(); err != nil {
				t.Errorf("Flush: %v", err)
				return
			}
			_ = w.Bytes() + w.Events()
			flushes++
		}
	})
	for _, ev := range events {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, got, err := readAll(buf.Bytes())
	if err != io.EOF {
		t.Fatal(err)
	}
	assertEvents(t, got, events)
	t.Logf("%d flushes, %d bytes", flushes, buf.Len())
}
