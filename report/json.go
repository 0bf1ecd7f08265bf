package report

import (
	"encoding/json"
	"io"

	"github.com/sqscope/sqscope/analyzer"
)

// WriteJSON writes the snapshot as one JSON object, indented, without
// HTML escaping. What each field is called, and which a QP's mode or
// provider leaves out, the snapshot's types say.
func WriteJSON(w io.Writer, s analyzer.Snapshot) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(s)
}
