package advise

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/sqscope/sqscope/analyzer"
)

// Limits are what a replay cannot know, printed with every answer.
var Limits = []string{
	"the application's reaction to backpressure: the replay keeps at most max_send_wr WRs outstanding and polls until a completion makes room",
	"its compute between posts and the host's cost per call: the replay posts as fast as the queue allows, so WR/s is the NIC model's bound",
	"the WRs it would post differently under other settings: the stream (opcodes, sizes, SGEs) is replayed as recorded, failed posts included, its last WR signaled",
	"how it polls: the replay polls after every post and while the queue is full, and takes every completion due",
	"what QPs share: each is replayed alone, without the CQ or the host thread it shares with others",
	"PCIe bytes count " + fmt.Sprint(analyzer.TLPHeader) + " B of TLP header per transaction, an estimate",
}

// Report is the JSON document.
type Report struct {
	// Error says why advise ended without advice, or on a damaged
	// recording (what it read before the damage is advised on).
	Error string `json:"error,omitempty"`
	Model Model  `json:"model"`
	// ModelError is the model's error measured against the simulated HCA.
	ModelError ModelError `json:"model_error"`
	Limits     []string   `json:"limits"`
	QPs        []Advice   `json:"qps"`
	// NotAdvised are the QPs that posted WRs and cannot be replayed, and
	// why.
	NotAdvised []NotAdvised `json:"not_advised,omitempty"`
}

// WriteJSON writes the report: every candidate, the QPs not advised on,
// the error that ended it.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteText writes per QP the current settings and what they measured,
// the best candidates with the changes that give them (WriteQPText), the
// QPs not advised on and why, the model and its limits (WriteRestText).
func WriteText(w io.Writer, m Model, ads []Advice, not []NotAdvised) error {
	for i := range ads {
		if err := WriteQPText(w, &ads[i]); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	return WriteRestText(w, m, not)
}

// WriteQPText writes one QP's advice as WriteText does.
func WriteQPText(w io.Writer, ad *Advice) error {
	ew := &errWriter{w: w}
	c := &ad.Measured
	fmt.Fprintf(ew, "QP %#x (pid %d, %s): %d WRs recorded\n", ad.QPNum, ad.PID, c.Type, len(ad.WRs))
	fmt.Fprintf(ew, "  current: %s (max_inline_data %d)\n", ad.Stream.Current, ad.Caps.MaxInlineData)
	if ad.NotRecorded > 0 {
		fmt.Fprintf(ew, "  %d WRs past the recording's bounds have no detail and are not replayed\n", ad.NotRecorded)
	}
	fmt.Fprintf(ew, "  measured: %d doorbells, %d BlueFlame, %d WQE reads, %d payload reads, %d CQE writes, peak %d outstanding, %d ENOMEM\n",
		c.Doorbells, c.BFWrites, c.DMAReadsWQE, c.DMAReadsPayload, c.CQEWrites, c.PeakOutstanding, c.ENOMEMSQFull+c.ENOMEMInline+c.ENOMEMSGE)
	if r := c.Rates.WRsPerSec; r > 0 && ad.Current.Overflow == "" && ad.Current.WRsPerSec > 1.15*r {
		fmt.Fprintf(ew, "  recorded at %.0f WR/s (traced), the replay of its settings predicts %.0f: the host, not the NIC model, set\n"+
			"  the recorded rate, and the WR/s below are the NIC's bound, not what the application will reach\n", r, ad.Current.WRsPerSec)
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  \tWR/s\tPCIe B/WR\tdoorbells\tBF\tWQE reads\tpayload reads\tCQE writes\tpeak out\t")
	row := func(name string, p *Prediction) {
		fmt.Fprintf(tw, "  %s\t%.0f\t%.1f\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, p.WRsPerSec, p.BytesPerWR(),
			p.Doorbells, p.BFWrites, p.DMAReadsWQE, p.DMAReadsPayload, p.CQEWrites, p.PeakOutstanding)
	}
	if ad.Current.Overflow == "" {
		row("current (replayed)", &ad.Current)
	}
	for i := range ad.Best {
		row(fmt.Sprintf("#%d", i+1), &ad.Best[i].Prediction)
	}
	tw.Flush()
	if ad.Current.Overflow != "" {
		fmt.Fprintf(ew, "  current settings replayed: %s\n", ad.Current.Overflow)
	}
	fmt.Fprintf(ew, "  best of %d candidates (throughput vs PCIe bytes, none overflows):\n", len(ad.All))
	for i, b := range ad.Best {
		fmt.Fprintf(ew, "  #%d %s:\n", i+1, b.Settings)
		for _, x := range b.Changes {
			fmt.Fprintf(ew, "       %s\n", x)
		}
	}
	return ew.err
}

// WriteRestText writes what follows the QPs in WriteText: the QPs not
// advised on and why, the model, its measured error and what a replay
// cannot know.
func WriteRestText(w io.Writer, m Model, not []NotAdvised) error {
	ew := &errWriter{w: w}
	for _, n := range not {
		fmt.Fprintf(ew, "QP %#x (pid %d): not advised: %s\n", n.QPNum, n.PID, n.Why)
	}
	if len(not) > 0 {
		fmt.Fprintln(ew)
	}
	fmt.Fprintf(ew, "model: simulated HCA NIC timing %s; BlueFlame prefer_bf=%t shut_up_bf=%t\n", m.NIC, m.BF.PreferBF, m.BF.ShutUpBF)
	fmt.Fprintf(ew, "model error, measured: %s\n", MeasuredError)
	fmt.Fprintln(ew, "the replay cannot know:")
	for _, l := range Limits {
		fmt.Fprintf(ew, "  - %s\n", l)
	}
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
