package bpftest

import (
	"os"
	"testing"
	"time"
)

func TestHostSpeed(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" {
			t.Fatal("BPF is required here (SQSCOPE_REQUIRE_BPF=1): not root")
		}
		t.Skip("needs root to place a uprobe")
	}
	s := HostSpeed(t)
	if s.Err != nil {
		t.Fatalf("the trap was not measured: %v", s.Err)
	}
	// A uprobe trap is a kernel entry and exit with an int3: never below
	// 50 ns on any machine, and no test host takes 1 ms.
	if s.Trap < 50*time.Nanosecond || s.Trap > time.Millisecond || s.CPUShare <= 0 || s.CPUShare > 1 || s.Scale < 1 || s.Scale > 100 {
		t.Errorf("implausible: %+v", s)
	}
}
