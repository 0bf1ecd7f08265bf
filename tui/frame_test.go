package tui

import (
	"testing"

	"github.com/gdamore/tcell/v2"
)

// countingScreen counts the cells written to a screen.
type countingScreen struct {
	tcell.SimulationScreen
	puts int
}

func (c *countingScreen) Put(x, y int, s string, style tcell.Style) (string, int) {
	c.puts++
	return c.SimulationScreen.Put(x, y, s, style)
}

// The terminal's screen gets the cells that changed since the frame it
// shows, all of them after a resize, and shows what was drawn.
func TestFrameScreenSendsChanges(t *testing.T) {
	sim := tcell.NewSimulationScreen("UTF-8")
	if err := sim.Init(); err != nil {
		t.Fatal(err)
	}
	sim.SetSize(20, 5)
	real := &countingScreen{SimulationScreen: sim}
	f := newFrameScreen(real)
	red := tcell.StyleDefault.Foreground(tcell.ColorRed)
	frame := func(word string, wide bool) int {
		t.Helper()
		real.puts = 0
		f.Clear()
		f.PutStrStyled(0, 0, word, red)
		f.SetContent(0, 1, '█', nil, tcell.StyleDefault)
		if wide {
			f.PutStrStyled(5, 2, "界x", tcell.StyleDefault)
		} else {
			f.PutStrStyled(5, 2, "ab", tcell.StyleDefault)
		}
		f.Show()
		return real.puts
	}
	line := func(y int) string {
		var s string
		for x := range 8 {
			g, _, w := sim.Get(x, y)
			if w == 0 {
				continue
			}
			s += g
		}
		return s
	}
	if n := frame("hello", false); n != 100 {
		t.Fatalf("first frame: %d cells sent, want all 100", n)
	}
	if line(0) != "hello   " || line(1) != "█       " || line(2) != "     ab " {
		t.Fatalf("screen shows %q %q %q", line(0), line(1), line(2))
	}
	if _, style, _ := sim.Get(1, 0); style != red {
		t.Fatalf("style %v sent, want %v", style, red)
	}
	if n := frame("hello", false); n != 0 {
		t.Fatalf("the same frame again: %d cells sent, want none", n)
	}
	if n := frame("help!", false); n != 2 || line(0) != "help!   " {
		t.Fatalf("two letters changed: %d cells sent, screen %q", n, line(0))
	}
	if n := frame("help!", true); n != 3 {
		t.Fatalf("a wide grapheme over two letters: %d cells sent, want 3", n)
	}
	if g, _, w := sim.Get(5, 2); g != "界" || w != 2 {
		t.Fatalf("screen holds %q of width %d", g, w)
	}
	if g, _, _ := sim.Get(7, 2); g != "x" {
		t.Fatalf("screen holds %q after the wide grapheme", g)
	}
	if g, _, w := f.Get(5, 2); g != "界" || w != 2 {
		t.Fatalf("Get = %q, %d", g, w)
	}
	if r, _, _, _ := f.GetContent(0, 1); r != '█' {
		t.Fatalf("GetContent = %q", r)
	}
	if n := frame("help!", false); n != 3 || line(2) != "     ab " {
		t.Fatalf("back to narrow: %d cells sent, screen %q", n, line(2))
	}
	sim.SetSize(10, 4)
	if n := frame("help!", false); n != 40 || line(0) != "help!   " {
		t.Fatalf("after a resize: %d cells sent, want all 40; screen %q", n, line(0))
	}
}
