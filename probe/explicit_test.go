package probe

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestParseProbe(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    ExplicitProbe
		wantErr string
	}{
		{in: "post_send=/usr/lib/libmlx5.so:0x1a2b0", want: ExplicitProbe{"post_send", "/usr/lib/libmlx5.so", 0x1a2b0}},
		{in: "poll_cq=/lib/x.so:4096", want: ExplicitProbe{"poll_cq", "/lib/x.so", 4096}},
		{in: "post_recv = /a b/c.so : 0X10", want: ExplicitProbe{"post_recv", "/a b/c.so", 0x10}},
		{in: "wr_complete=/c:d.so:0x10", want: ExplicitProbe{"wr_complete", "/c:d.so", 0x10}},
		{in: "post_send", wantErr: "no '='"},
		{in: "post_sned=/x.so:0x10", wantErr: `unknown function "post_sned"`},
		{in: "create_qp=/x.so:0x10", wantErr: "unknown function"},
		{in: "cq_read_qp_num=/x.so:0x10", wantErr: "unknown function"}, // learned, never probed
		{in: "post_send=/x.so", wantErr: "no ':'"},
		{in: "post_send=:0x10", wantErr: "empty library path"},
		{in: "post_send=/x.so:", wantErr: "empty offset"},
		{in: "post_send=/x.so:0xzz", wantErr: `bad offset "0xzz"`},
		{in: "post_send=/x.so:-5", wantErr: "bad offset"},
		{in: "post_send=/x.so:0x1ffffffffffffffff", wantErr: "bad offset"},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseProbe(c.in)
			if c.wantErr != "" {
				if err == nil || !contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestCheckProbe(t *testing.T) {
	bin := buildTarget(t)
	sym, err := ResolveSymbol(bin, "fake_post_send")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		p       ExplicitProbe
		wantErr string
	}{
		{"inside text", ExplicitProbe{"post_send", bin, sym.Offset}, ""},
		{"ELF header", ExplicitProbe{"post_send", bin, 0x10}, "outside the executable segments"},
		{"past the end", ExplicitProbe{"post_send", bin, 1 << 40}, "outside the executable segments"},
		{"missing file", ExplicitProbe{"post_send", "/nonexistent.so", 0x1000}, "/nonexistent.so"},
		{"not ELF", ExplicitProbe{"post_send", "explicit_test.go", 0x10}, "explicit_test.go"},
		{"one byte into a function", ExplicitProbe{"post_send", bin, sym.Offset + 1}, "is 1 bytes into fake_post_send, which starts at"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckProbe(c.p, false)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !contains(err.Error(), c.wantErr) || contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line saying %q", err, c.wantErr)
			}
		})
	}
}

// --force-probe (anywhere) takes an offset inside a function; a stripped
// file, with no symbol to tell, takes any offset in its code.
func TestCheckProbeAnywhere(t *testing.T) {
	bin := buildTarget(t)
	sym, err := ResolveSymbol(bin, "fake_post_send")
	if err != nil {
		t.Fatal(err)
	}
	inside := ExplicitProbe{"post_send", bin, sym.Offset + 1}
	if err := CheckProbe(inside, true); err != nil {
		t.Errorf("anywhere: %v", err)
	}
	stripped := filepath.Join(t.TempDir(), "stripped")
	if out, err := exec.Command("objcopy", "--strip-all", bin, stripped).CombinedOutput(); err != nil {
		t.Skipf("objcopy: %v %s", err, out)
	}
	if err := CheckProbe(ExplicitProbe{"post_send", stripped, sym.Offset + 1}, false); err != nil {
		t.Errorf("stripped file: %v", err)
	}
}

func FuzzParseProbe(f *testing.F) {
	for _, s := range []string{"post_send=/usr/lib/libmlx5.so:0x1a2b0", "poll_cq=x:1", "=:", "a=b:c:d", "post_recv=/x:0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProbe(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		if p.Path == "" || p.Func == "" {
			t.Errorf("accepted %q as %+v", s, p)
		}
		// what String prints parses back to the same probe
		if q, err := ParseProbe(p.String()); err != nil || q != p {
			t.Errorf("round trip of %+v: %+v, %v", p, q, err)
		}
	})
}
