package advise

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// ScreenWRs is how many WRs of a stream each candidate is first replayed
// with; the candidates kept are then replayed with the whole stream.
const ScreenWRs = 8192

// Advice is one QP's answer.
type Advice struct {
	*Stream
	// Current is the replay of the recorded settings, for comparison
	// with the candidates on the same model.
	Current Prediction `json:"current_predicted"`
	// Best are the overflow-free candidates no other beats on both WR/s
	// and PCIe bytes per WR, fastest first, each replayed in full.
	Best []Candidate `json:"best"`
	// All is every candidate screened.
	All []Prediction `json:"candidates"`
}

// Candidate is a best candidate and what to change to get it.
type Candidate struct {
	Prediction
	Changes []string `json:"changes"`
}

// Advise replays every candidate setting on each stream. It stops, with
// ctx's error, within one replay of ctx being done (Ctrl-C).
func Advise(ctx context.Context, streams []*Stream, m Model) ([]Advice, error) {
	var out []Advice
	for _, s := range streams {
		ad, err := adviseQP(ctx, s, m)
		if err != nil {
			return nil, err
		}
		out = append(out, ad)
	}
	return out, nil
}

func adviseQP(ctx context.Context, s *Stream, m Model) (Advice, error) {
	cur := s.Current
	if cur.PostList == 0 {
		cur.PostList = 1
	}
	ad := Advice{Stream: s, Current: replay(s, cur, m, 0)}
	seen := map[Settings]bool{}
	for _, set := range grid(s) {
		if seen[set] {
			continue
		}
		seen[set] = true
		if err := ctx.Err(); err != nil {
			return ad, err
		}
		ad.All = append(ad.All, replay(s, set, m, ScreenWRs))
	}
	front := pareto(ad.All)
	for _, p := range front {
		if err := ctx.Err(); err != nil {
			return ad, err
		}
		full := replay(s, p.Settings, m, 0)
		if full.Overflow != "" {
			continue
		}
		ad.Best = append(ad.Best, Candidate{Prediction: full, Changes: changes(s, cur, full)})
	}
	sort.SliceStable(ad.Best, func(i, j int) bool {
		a, b := &ad.Best[i].Prediction, &ad.Best[j].Prediction
		if math.Abs(a.WRsPerSec-b.WRsPerSec) > rateTolerance*b.WRsPerSec {
			return a.WRsPerSec > b.WRsPerSec
		}
		return a.BytesPerWR() < b.BytesPerWR()
	})
	return ad, nil
}

// grid is the settings tried: inline thresholds from none to the largest
// payload the WQE can carry, signal intervals and post lists in powers of
// two up to the depth, depths from the current one up to 1024.
func grid(s *Stream) []Settings {
	var inl []uint32
	inl = append(inl, 0)
	if s.Current.InlineUpTo > 0 {
		inl = append(inl, s.Current.InlineUpTo)
	}
	limit := inlineLimit(s.Overhead)
	var sizes []uint32
	for _, w := range s.WRs {
		if w.carriesPayload() && w.Bytes <= limit && !slices.Contains(sizes, w.Bytes) {
			sizes = append(sizes, w.Bytes)
			if len(sizes) > 64 {
				break
			}
		}
	}
	slices.Sort(sizes)
	if len(sizes) > 3 { // the three largest: the cut-offs that matter most
		sizes = sizes[len(sizes)-3:]
	}
	inl = append(inl, sizes...)
	depths := []uint32{s.Current.MaxSendWR}
	for d := uint32(64); d <= 1024; d *= 2 {
		if d != s.Current.MaxSendWR {
			depths = append(depths, d)
		}
	}
	var out []Settings
	for _, d := range depths {
		for _, t := range inl {
			for sig := uint32(1); sig <= d && sig <= 256; sig *= 2 {
				for l := uint32(1); l <= d && l <= 32; l *= 2 {
					out = append(out, Settings{InlineUpTo: t, SignalEvery: sig, PostList: l, MaxSendWR: d})
				}
			}
		}
	}
	return out
}

// rateTolerance: WR/s closer than this fraction count as equal, the model
// being no finer (a BlueFlame write saves one DMA latency once, not per WR,
// on a link-bound queue).
const rateTolerance = 0.01

// beats reports whether o is at least as good as p on both axes and
// better on one.
func beats(o, p *Prediction) bool {
	lo, hi := p.WRsPerSec*(1-rateTolerance), p.WRsPerSec*(1+rateTolerance)
	return o.WRsPerSec >= lo && o.BytesPerWR() <= p.BytesPerWR() && (o.BytesPerWR() < p.BytesPerWR() || o.WRsPerSec > hi)
}

// pareto keeps the overflow-free predictions no other beats; of equal
// ones, the first (the smallest depth, inline threshold, interval and
// list).
func pareto(ps []Prediction) []Prediction {
	var front []Prediction
	for i := range ps {
		p := &ps[i]
		if p.Overflow != "" {
			continue
		}
		dominated := false
		for j := range ps {
			o := &ps[j]
			if i == j || o.Overflow != "" {
				continue
			}
			same := o.BytesPerWR() == p.BytesPerWR() && !beats(p, o) && !beats(o, p) && math.Abs(o.WRsPerSec-p.WRsPerSec) <= rateTolerance*p.WRsPerSec
			if beats(o, p) || (same && j < i) {
				dominated = true
				break
			}
		}
		if !dominated {
			front = append(front, *p)
		}
	}
	return front
}

// changes says, in the application's terms, what to do to get p.
func changes(s *Stream, cur Settings, p Prediction) []string {
	var c []string
	switch {
	case p.InlineUpTo == 0 && cur.InlineUpTo > 0:
		c = append(c, "post without IBV_SEND_INLINE")
	case p.InlineUpTo > 0 && p.InlineUpTo != cur.InlineUpTo:
		x := fmt.Sprintf("post WRs of <= %d B with IBV_SEND_INLINE", p.InlineUpTo)
		if p.InlineUpTo > s.Caps.MaxInlineData {
			x += fmt.Sprintf(" (create the QP with max_inline_data >= %d)", p.InlineUpTo)
		}
		c = append(c, x)
	}
	if p.SignalEvery != cur.SignalEvery {
		if p.SignalEvery == 1 {
			c = append(c, "signal every WR")
		} else {
			c = append(c, fmt.Sprintf("signal one WR in every %d", p.SignalEvery))
		}
		if s.SigAll && p.SignalEvery > 1 {
			c = append(c, "create the QP with sq_sig_all = 0")
		}
	}
	if p.PostList != cur.PostList {
		c = append(c, fmt.Sprintf("post %d WRs per call (a list linked by next, or one ibv_wr_start..ibv_wr_complete)", p.PostList))
	}
	if p.MaxSendWR != cur.MaxSendWR {
		c = append(c, fmt.Sprintf("create the QP with max_send_wr >= %d and keep at most that many outstanding", p.MaxSendWR))
	}
	if len(c) == 0 {
		c = append(c, "keep the current settings")
	}
	return c
}

// String is the settings as one line.
func (s Settings) String() string {
	inl := "no inline"
	if s.InlineUpTo > 0 {
		inl = fmt.Sprintf("inline <= %d B", s.InlineUpTo)
	}
	sig := "never signaled"
	if s.SignalEvery > 0 {
		sig = fmt.Sprintf("signal 1/%d", s.SignalEvery)
	}
	return strings.Join([]string{inl, sig, fmt.Sprintf("%d WR/post", s.PostList), fmt.Sprintf("max_send_wr %d", s.MaxSendWR)}, ", ")
}
