package tui

import (
	"unicode/utf8"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"
	"github.com/rivo/uniseg"
)

// NewApplication is a tview application on the terminal, drawn through a
// frameScreen.
func NewApplication() (*tview.Application, error) {
	scr, err := tcell.NewScreen()
	if err != nil {
		return nil, err
	}
	return tview.NewApplication().SetScreen(newFrameScreen(scr)), nil
}

// frameScreen is the screen tview draws a whole frame into: tview clears
// the screen, then each pane clears its part and writes it, and tcell
// takes every cell written over a blank as changed and sends it to the
// terminal again, frame after frame. frameScreen keeps the frame and
// hands the terminal's screen, at Show, only the cells that differ from
// the frame shown before. tview draws from one goroutine at a time, under
// its application's lock: the frame needs no lock of its own (a lock per
// cell written cost a tenth of a refresh).
type frameScreen struct {
	tcell.Screen // the terminal's
	w, h         int
	cells        []frameCell // the frame being drawn
	shown        []frameCell // the frame the terminal's screen holds
	stale        bool        // the terminal's screen holds something else
}

// frameCell is a cell: its grapheme ("" for the right half of a wide
// one), its style and its width.
type frameCell struct {
	s     string
	style tcell.Style
	width int
}

func newFrameScreen(s tcell.Screen) *frameScreen { return &frameScreen{Screen: s, stale: true} }

// fit sizes the frame to the terminal's screen.
func (f *frameScreen) fit() {
	w, h := f.Screen.Size()
	if w == f.w && h == f.h && len(f.cells) == w*h {
		return
	}
	f.w, f.h = w, h
	f.cells, f.shown = make([]frameCell, w*h), make([]frameCell, w*h)
	f.stale = true
}

func (f *frameScreen) at(x, y int) *frameCell {
	if x < 0 || y < 0 || x >= f.w || y >= f.h {
		return nil
	}
	return &f.cells[y*f.w+x]
}

// merge is style where it leaves a colour to the cell's current one.
func merge(style, cur tcell.Style) tcell.Style {
	fg, bg, _ := style.Decompose()
	cfg, cbg, _ := cur.Decompose()
	if fg == tcell.ColorNone {
		style = style.Foreground(cfg)
	}
	if bg == tcell.ColorNone {
		style = style.Background(cbg)
	}
	return style
}

func (f *frameScreen) Clear() { f.Fill(' ', tcell.StyleDefault) }

func (f *frameScreen) Fill(r rune, style tcell.Style) {
	f.fit()
	s := runeString(r)
	for i := range f.cells {
		c := &f.cells[i]
		c.s, c.style, c.width = s, merge(style, c.style), 1
	}
}

// ascii are the strings of the ASCII characters.
var ascii = func() (s [utf8.RuneSelf]string) {
	for i := range s {
		s[i] = string(rune(i))
	}
	return s
}()

// runeString is r as a string, without making one for ASCII.
func runeString(r rune) string {
	if r >= 0 && r < utf8.RuneSelf {
		return ascii[r]
	}
	return string(r)
}

// Put writes str's first grapheme at x, y.
func (f *frameScreen) Put(x, y int, str string, style tcell.Style) (string, int) {
	c := f.at(x, y)
	if c == nil {
		return str, 0
	}
	var g string
	width := 1
	if str != "" && str[0] < utf8.RuneSelf {
		g, str = str[:1], str[1:]
	} else {
		g, str, width, _ = uniseg.FirstGraphemeClusterInString(str, -1)
	}
	if g == "" {
		return str, 0
	}
	c.s, c.style, c.width = g, merge(style, c.style), width
	for i := 1; i < width; i++ {
		if n := f.at(x+i, y); n != nil {
			n.s, n.style, n.width = "", c.style, 0
		}
	}
	return str, width
}

func (f *frameScreen) PutStr(x, y int, str string) { f.PutStrStyled(x, y, str, tcell.StyleDefault) }

func (f *frameScreen) PutStrStyled(x, y int, str string, style tcell.Style) {
	for str != "" && x < f.w {
		var w int
		if str, w = f.Put(x, y, str, style); w == 0 {
			break
		}
		x += w
	}
}

func (f *frameScreen) SetContent(x, y int, r rune, comb []rune, style tcell.Style) {
	s := runeString(r)
	if len(comb) > 0 {
		s = string(append([]rune{r}, comb...))
	}
	f.Put(x, y, s, style)
}

func (f *frameScreen) SetCell(x, y int, style tcell.Style, ch ...rune) {
	if len(ch) > 0 {
		f.SetContent(x, y, ch[0], ch[1:], style)
	}
}

func (f *frameScreen) Get(x, y int) (string, tcell.Style, int) {
	if c := f.at(x, y); c != nil {
		return c.s, c.style, c.width
	}
	return "", tcell.StyleDefault, 0
}

func (f *frameScreen) GetContent(x, y int) (rune, []rune, tcell.Style, int) {
	s, style, w := f.Get(x, y)
	var rs []rune
	for _, r := range s {
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return ' ', nil, style, w
	}
	return rs[0], rs[1:], style, w
}

// Show hands the terminal's screen the cells that changed, then shows it.
func (f *frameScreen) Show() {
	f.push()
	f.Screen.Show()
}

// Sync hands the terminal's screen the whole frame, then has it drawn
// again in full.
func (f *frameScreen) Sync() {
	f.stale = true
	f.push()
	f.Screen.Sync()
}

func (f *frameScreen) push() {
	if w, h := f.Screen.Size(); w != f.w || h != f.h {
		return // resized since the frame was drawn: the next frame fits
	}
	for i := range f.cells {
		c := &f.cells[i]
		if !f.stale && *c == f.shown[i] {
			continue
		}
		f.shown[i] = *c
		s := c.s
		if s == "" {
			s = " " // the right half of a wide grapheme, which tcell skips
		}
		f.Screen.Put(i%f.w, i/f.w, s, c.style)
	}
	f.stale = false
}
